#!/usr/bin/env bash
# What make chaos needs beyond scripts/deps.sh: libfaketime (Debian's
# faketime), which skews one tickd's clock. As root it runs apt-get when the
# package is missing; otherwise it prints the line to run.
set -euo pipefail
dpkg-query -W -f='${Status}' faketime 2>/dev/null | grep -q 'install ok installed' && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "make chaos needs: sudo apt-get install -y faketime" >&2
  exit 1
fi
echo "installing: faketime"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends faketime >/dev/null

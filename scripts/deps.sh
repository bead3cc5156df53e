#!/usr/bin/env bash
# Install the Debian 12 packages tickd needs to build, run and test, when
# missing. As root it runs apt-get; otherwise it prints the line to run.
set -euo pipefail
pkgs=(gcc make pkg-config libc6-dev
      libhiredis-dev libcurl4-openssl-dev libcjson-dev libevent-dev libinih-dev
      libcmocka-dev libssl-dev clang libclang-rt-14-dev redis-server redis-tools python3
      python3-pytest python3-pytest-xdist python3-yaml python3-jsonschema curl openssl tzdata prometheus groff-base man-db
      faketime chromium lua5.1)
# and those named as arguments (make deb: Debian's packaging tools)
pkgs+=("$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# the tests verify signed callbacks with the npm package standardwebhooks and
# compare cron runs with croner, and drive chromium through the web console
# with playwright-core; the console's libraries (web/) come from npm too. Any
# node with npm will do, Debian's when there is none
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
((${#missing[@]} == 0)) && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "tickd needs: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

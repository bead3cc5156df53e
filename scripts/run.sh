#!/usr/bin/env bash
# make run: use the configured Redis, or 127.0.0.1:6379 if it answers, or
# start a local redis-server under ./var; then run tickd in the foreground.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${TICKD_REDIS_NODES:-127.0.0.1:6379}
listen=${TICKD_SERVER_LISTEN:-127.0.0.1:8080}
first=${nodes%%,*}
cli=(redis-cli -h "${first%:*}" -p "${first##*:}")
if [ -n "${TICKD_REDIS_PASSWORD:-}" ]; then
  export REDISCLI_AUTH=$TICKD_REDIS_PASSWORD
  [ -z "${TICKD_REDIS_USERNAME:-}" ] || cli+=(--user "$TICKD_REDIS_USERNAME")
fi
answer=$("${cli[@]}" ping 2>&1 || true)
case $answer in
  *NOAUTH*|*WRONGPASS*|*"AUTH failed"*|*"invalid password"*|*"invalid username"*)
    echo "Redis on $first refuses us ($answer): set TICKD_REDIS_PASSWORD (and TICKD_REDIS_USERNAME)" >&2
    exit 1 ;;
esac
if [ "$answer" != PONG ]; then
  if [ -n "${TICKD_REDIS_NODES:-}" ]; then
    echo "Redis at $nodes does not answer" >&2
    exit 1
  fi
  if [ -n "${TICKD_REDIS_USERNAME:-}" ]; then
    echo "no Redis on $first, and TICKD_REDIS_USERNAME is set: start the Redis with that ACL user first" >&2
    exit 1
  fi
  mkdir -p var
  echo "no Redis on $first: starting one in ./var"
  # the password, if one is set, goes on stdin: not in the process list
  printf 'requirepass "%s"\n' "${TICKD_REDIS_PASSWORD:-}" |
    redis-server - --port "${first##*:}" --bind 127.0.0.1 --dir "$PWD/var" \
      --appendonly yes --daemonize yes --pidfile "$PWD/var/redis.pid" --logfile "$PWD/var/redis.log"
  for _ in $(seq 50); do "${cli[@]}" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
fi
auth=
# the token is left for the user's shell to fill in: not printed
ctlauth=
[ -z "${TICKD_SERVER_API_TOKEN:-}" ] || auth=' -H "Authorization: Bearer $TICKD_SERVER_API_TOKEN"'
[ -z "${TICKD_SERVER_API_TOKEN:-}" ] || ctlauth=' TICKD_TOKEN="$TICKD_SERVER_API_TOKEN"'
cat <<MSG

tickd on http://$listen, Redis $nodes. In another terminal, a receiver that
prints each callback (tickctl listen), then a task calling it in 2 s:

  build/tickctl listen --port 9000 &
  curl -s -X POST http://$listen/v1/tasks -H 'Content-Type: application/json'$auth \\
    -d '{"callback_url": "http://127.0.0.1:9000/hook", "delay_ms": 2000, "req": {"hi": 1}}'

The same with tickctl:

  TICKD_URL=http://$listen$ctlauth build/tickctl add http://127.0.0.1:9000/hook --in 2s --body '{"hi":1}'

MSG
exec build/tickd --listen "$listen" --redis "$nodes" ${TICKD_ARGS:-}

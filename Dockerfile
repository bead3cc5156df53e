# tickd container image: delayed HTTP callbacks on Redis.
#
#   docker build -t tickd .
#   docker run --rm -p 8080:8080 tickd --listen 0.0.0.0:8080 --redis redis-host:6379
#
# Configuration: the flags of `tickd --help`, or any key as the environment
# variable TICKD_<SECTION>_<KEY> (e.g. -e TICKD_REDIS_NODES=10.0.0.5:6379).
# docker-compose.yml runs three replicas against a six-node Redis Cluster.

# ---- build -----------------------------------------------------------------
FROM debian:12-slim AS build

# The build half of scripts/deps.sh: compiler and the libraries tickd links
# (-lhiredis -lcurl -lcjson -levent -levent_pthreads -linih -lcrypto), and
# python3-yaml, which turns doc/openapi.yaml into the JSON tickd serves.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc make pkg-config libc6-dev \
      libhiredis-dev libcurl4-openssl-dev libcjson-dev libevent-dev libinih-dev libssl-dev \
      python3 python3-yaml \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
# Only the sources: a host build/ directory must never reach the image (make
# would take its objects, built against the host's libraries, as up to date).
COPY Makefile ./
COPY cmd/ cmd/
COPY src/ src/
COPY lua/ lua/
COPY conf/ conf/
COPY doc/ doc/
COPY scripts/openapi_c.py scripts/
RUN make build/tickd build/tickctl && make install PREFIX=/usr/local

# ---- runtime ---------------------------------------------------------------
FROM debian:12-slim

# Runtime libraries only (+ ca-certificates for https callbacks, curl for the
# health check).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libhiredis0.14 libcurl4 libcjson1 libevent-2.1-7 libevent-pthreads-2.1-7 libinih1 libssl3 \
      ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system tickd \
 && useradd --system --gid tickd --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin tickd

# tickd finds its Lua scripts in ../share/tickd/lua beside the binary.
COPY --from=build /usr/local/bin/tickd /usr/local/bin/tickd
# the command-line client: docker compose exec tickd-1 tickctl ls
COPY --from=build /usr/local/bin/tickctl /usr/local/bin/tickctl
COPY --from=build /usr/local/share/tickd /usr/local/share/tickd

USER tickd
EXPOSE 8080
# /healthz answers 200 only while Redis is reachable.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD curl -fsS -o /dev/null http://127.0.0.1:8080/healthz || exit 1
# SIGTERM starts a graceful stop (server.shutdown_grace_ms, default 10 s).
STOPSIGNAL SIGTERM
ENTRYPOINT ["tickd"]
CMD ["--listen", "0.0.0.0:8080"]

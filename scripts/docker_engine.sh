#!/usr/bin/env bash
# Make a Docker engine available for the docker backend: install docker.io (and mmdebstrap, which
# makes the offline base image) with apt if missing, start it if it is not answering, wait for its socket. Idempotent: a running engine is
# left as it is. Needs root (apt, dockerd); without root, or without apt, it says so and exits 0
# (the docker tests then skip with one line).
#
# The daemon is started exactly so: no default bridge, no iptables rules, no masquerading. No
# container network exists besides `none` and `host` (the agent's containers use `none`; image
# builds use `host` to reach the package registries the host uses).
set -euo pipefail

SOCK=${A2C_DOCKER_SOCK:-/var/run/docker.sock}
LOG=${A2C_DOCKERD_LOG:-/var/log/a2c-dockerd.log}

answers() { [ -S "$SOCK" ] && docker -H "unix://$SOCK" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

if answers; then
  echo "  docker engine: running ($(docker -H "unix://$SOCK" version --format '{{.Server.Version}}'))"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "  docker engine: not running, and starting one needs root (the docker tests will skip)"
  exit 0
fi
# docker.io for the engine; mmdebstrap makes the offline base image (docs/runtime.md)
if ! command -v dockerd >/dev/null 2>&1 || ! command -v mmdebstrap >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "  docker engine: dockerd or mmdebstrap is missing and apt-get is not here (the docker tests will skip)"
    exit 0
  fi
  echo "  docker engine: installing docker.io and mmdebstrap (apt-get)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io mmdebstrap >/dev/null
fi
echo "  docker engine: starting dockerd (log: $LOG)"
nohup dockerd --storage-driver=overlay2 --bridge=none --iptables=false --ip-masq=false \
  -H "unix://$SOCK" >>"$LOG" 2>&1 </dev/null &
for _ in $(seq 1 120); do
  if answers; then
    echo "  docker engine: running ($(docker -H "unix://$SOCK" version --format '{{.Server.Version}}'))"
    exit 0
  fi
  sleep 0.5
done
echo "  docker engine: dockerd did not answer within 60 s; last lines of $LOG:"
tail -n 20 "$LOG" | sed 's/^/    /'
exit 1

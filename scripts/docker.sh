#!/usr/bin/env bash
# Installs Debian's docker.io when missing and starts dockerd when it is not answering.
# Usage: scripts/docker.sh ensure
source "$(dirname "$0")/lib.sh"

ensure() {
  apt_install docker.io
  if docker info >/dev/null 2>&1; then return 0; fi
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    say "starting docker (systemd)"
    systemctl start docker
  else
    say "starting dockerd (log: /var/log/ccp-dockerd.log)"
    # A session of its own: Ctrl-C on whoever started it (setup.sh runs the gateway in the foreground) or the end
    # of its process group must not take the engine, and every workspace, down with it.
    setsid dockerd </dev/null >/var/log/ccp-dockerd.log 2>&1 &
  fi
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  die "dockerd did not start; see /var/log/ccp-dockerd.log"
}

case "${1:-}" in
  ensure) ensure ;;
  *) die "usage: $0 ensure" ;;
esac

#!/usr/bin/env bash
# Prepares this machine for the CLI's folder mounts: the gateway runs sshfs (as the unprivileged MOUNT_USER,
# through the setuid fusermount3) and the mounts must propagate into the workspaces' containers.
# Usage: scripts/folder-mounts.sh ensure
source "$(dirname "$0")/lib.sh"

ensure() {
  local user=${MOUNT_USER:-ccp-mount}
  apt_install sshfs fuse3 util-linux
  if ! getent passwd "$user" >/dev/null; then
    say "adding the system user $user (sshfs for folder mounts runs as it)"
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user"
  fi
  # allow_other: the workspace user, not the mounting user, reads the mount.
  grep -q '^[[:space:]]*user_allow_other' /etc/fuse.conf 2>/dev/null || echo user_allow_other >>/etc/fuse.conf
  [ -e /dev/fuse ] || die "/dev/fuse is missing (modprobe fuse)"
  # udev's default rule makes /dev/fuse 0666; machines without udev leave it 0600.
  [ "$(stat -c %a /dev/fuse)" = 666 ] || chmod 0666 /dev/fuse
  # systemd makes / a shared mount; without systemd it is private and mounts would not reach containers.
  case $(findmnt -no PROPAGATION /) in
    shared*) ;;
    *)
      say "making / a shared mount (as systemd does) so folder mounts reach the workspaces"
      mount --make-rshared /
      ;;
  esac
}

case "${1:-}" in
  ensure) ensure ;;
  *) die "usage: $0 ensure" ;;
esac

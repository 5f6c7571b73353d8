#!/usr/bin/env bash
# Debian packages the tests need: chromium (end-to-end browser tests), openssh-server (the SSH
# device transport is tested against a real sshd on 127.0.0.1), and qemu-user-static,
# binfmt-support and debootstrap (the emulated arm64 board of `make board-test`), fish and tcsh (a
# device's POSIX worker command is run under them as login shells). Idempotent.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v qemu-aarch64-static >/dev/null 2>&1 || need+=(qemu-user-static)
command -v update-binfmts >/dev/null 2>&1 || need+=(binfmt-support)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v fish >/dev/null 2>&1 || need+=(fish)
command -v tcsh >/dev/null 2>&1 || need+=(tcsh)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "install_system_deps: need root to install ${need[*]} (apt-get); install them and re-run" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

#!/usr/bin/env bash
# Bring up a second real QEMU beside the host's: a Debian 12 chroot with libvirt 11.3 + QEMU 10.0.x from
# bookworm-backports and its own virtlogd/libvirtd (run as root; idempotent).
#
# Debian 12's libvirt 9.0 cannot probe QEMU 10 ("Failed to probe capabilities"), so the newer QEMU gets the
# libvirt it was built with. Its socket lives in the chroot's /run:
#   qemu:///system?socket=$ROOT/run/libvirt/libvirt-sock
set -euo pipefail

ROOT=${VIRTXML_CPU_BPO_ROOT:-/var/lib/virtxml-cpu-lab/bookworm-bpo}
MIRROR=${VIRTXML_CPU_MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/*$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SOCK="$ROOT/run/libvirt/libvirt-sock"
URI="qemu:///system?socket=$SOCK"
log() { echo "lab-bpo: $*" >&2; }

if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

if [ ! -x "$ROOT/usr/bin/apt-get" ]; then
  log "debootstrap bookworm into $ROOT ($MIRROR)"
  rm -rf "$ROOT"
  mkdir -p "$ROOT"
  debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >/dev/null
fi

mounted() { mountpoint -q "$ROOT/$1"; }
for fs in proc sys dev; do
  mounted "$fs" || { mkdir -p "$ROOT/$fs"; mount --rbind "/$fs" "$ROOT/$fs"; mount --make-rslave "$ROOT/$fs"; }
done
in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C "$@"; }

if [ ! -x "$ROOT/usr/sbin/libvirtd" ] || [ ! -x "$ROOT/usr/bin/qemu-system-x86_64" ]; then
  printf 'deb %s bookworm main\ndeb %s bookworm-backports main\n' "$MIRROR" "$MIRROR" > "$ROOT/etc/apt/sources.list"
  log "installing libvirt + QEMU from bookworm-backports in the chroot"
  in_root apt-get update -qq
  in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -t bookworm-backports qemu-system-x86 libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients >/dev/null
fi

# QEMU runs as libvirt-qemu, group kvm, which must be the gid that owns the host's /dev/kvm.
kvm_gid=$(stat -c %g /dev/kvm)
if in_root getent group kvm >/dev/null; then
  [ "$(in_root getent group kvm | cut -d: -f3)" = "$kvm_gid" ] || in_root groupmod -o -g "$kvm_gid" kvm
else
  in_root groupadd -o -g "$kvm_gid" kvm
fi
in_root getent group libvirt-qemu >/dev/null || in_root groupadd -r libvirt-qemu
in_root getent passwd libvirt-qemu >/dev/null || \
  in_root useradd -r -g libvirt-qemu -G kvm -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
mkdir -p "$ROOT/var/log/libvirt" "$ROOT/var/lib/libvirt/qemu" "$ROOT/var/cache/libvirt" "$ROOT/run/libvirt" \
  "$ROOT/var/lib/libvirt/images"
# A chroot cannot make its mounts private ("Failed disable mount propagation out of the root filesystem").
conf="$ROOT/etc/libvirt/qemu.conf"
grep -q '^namespaces *= *\[ *\]' "$conf" || printf '\n# virtxml-cpu test lab (chroot)\nnamespaces = [ ]\n' >> "$conf"

answering() { virsh -c "$URI" version >/dev/null 2>&1; }
if ! answering; then
  sock_ok() { python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' "$1" 2>/dev/null; }
  sock_ok "$ROOT/run/libvirt/virtlogd-sock" || in_root /usr/sbin/virtlogd -d
  in_root /usr/sbin/libvirtd -d --config /etc/libvirt/libvirtd.conf
  for _ in $(seq 1 150); do answering && break; sleep 0.2; done
fi
answering || { log "libvirtd in $ROOT does not answer"; exit 1; }
log "up: $(virsh -c "$URI" version | sed -n 's/.*Running hypervisor: //p') at $URI"

#!/usr/bin/env bash
# Bring up a Debian chroot lab: another release's libvirt + QEMU with its own virtlogd/libvirtd beside the
# host's (run as root; idempotent). Usage: up-chroot.sh LAB, one of
#   bookworm-bpo  Debian 12 + bookworm-backports: libvirt 11.3, QEMU 10.0.2
#   bullseye      Debian 11: libvirt 7.0, QEMU 5.2, Python 3.9, python3-libvirt 7.0
#   forky         Debian forky: libvirt 12.8, QEMU 11.1, Python 3.13
#
# A QEMU gets the libvirt it was built with (Debian 12's libvirt 9.0 cannot probe QEMU 10: "Failed to probe
# capabilities"). The daemon's socket lives in the chroot's /run:
#   qemu:///system?socket=$LAB_DIR/LAB/run/libvirt/libvirt-sock
# Each lab has its own directory and daemons, so several of these run side by side.
set -euo pipefail

LAB=${1:?usage: up-chroot.sh bookworm-bpo|bullseye|forky}
LAB_DIR=${VIRTXML_CPU_LAB_DIR:-/var/lib/virtxml-cpu-lab}
ROOT="$LAB_DIR/$LAB"
MIRROR=${VIRTXML_CPU_MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/*$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SOCK="$ROOT/run/libvirt/libvirt-sock"
URI="qemu:///system?socket=$SOCK"
log() { echo "lab-$LAB: $*" >&2; }

# suite to debootstrap, its debootstrap script, the apt sources, the release apt installs from, apt options
APT_OPTS=()
case "$LAB" in
  bookworm-bpo) SUITE=bookworm; SCRIPT=; SUITES="bookworm bookworm-backports"; TARGET=(-t bookworm-backports) ;;
  bullseye) SUITE=bullseye; SCRIPT=; SUITES="bullseye"; TARGET=() ;;
  # Debian 12's debootstrap has no script for suites after trixie; forky's Release file is past its
  # Valid-Until on this clock.
  forky) SUITE=forky; SCRIPT=/usr/share/debootstrap/scripts/sid; SUITES="forky"; TARGET=()
         APT_OPTS=(-o Acquire::Check-Valid-Until=false) ;;
  *) echo "up-chroot.sh: unknown lab '$LAB' (bookworm-bpo, bullseye or forky)" >&2; exit 2 ;;
esac

. "$(dirname "$0")/need-pkgs.sh"
need_pkgs debootstrap

# debootstrap removes $ROOT/debootstrap when it finished: a directory still holding it was interrupted.
if [ ! -x "$ROOT/usr/bin/apt-get" ] || [ -e "$ROOT/debootstrap" ]; then
  log "debootstrap $SUITE into $ROOT ($MIRROR)"
  ! mountpoint -q "$ROOT/proc" || { log "$ROOT is half made but has mounts; unmount them first"; exit 1; }
  rm -rf --one-file-system "$ROOT"
  mkdir -p "$ROOT"
  debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" $SCRIPT >/dev/null
fi

mounted() { mountpoint -q "$ROOT/$1"; }
for fs in proc sys dev; do
  mounted "$fs" || { mkdir -p "$ROOT/$fs"; mount --rbind "/$fs" "$ROOT/$fs"; mount --make-rslave "$ROOT/$fs"; }
done
in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C "$@"; }

# The daemons and QEMU, plus the Python binding and lxml the tool runs with there (the package's test
# installs the tool itself with apt and removes it again).
PKGS=(qemu-system-x86 libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients python3-libvirt python3-lxml)
have_all() { [ "$(in_root dpkg-query -W -f='${Status}\n' "${PKGS[@]}" 2>/dev/null | grep -c 'install ok installed')" = ${#PKGS[@]} ]; }
if ! have_all; then
  for s in $SUITES; do echo "deb $MIRROR $s main"; done > "$ROOT/etc/apt/sources.list"
  log "installing libvirt + QEMU ($SUITES) in the chroot"
  in_root apt-get "${APT_OPTS[@]}" update -qq
  in_root env DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" install -y -qq --no-install-recommends \
    "${TARGET[@]}" "${PKGS[@]}" >/dev/null
fi
if [ ${#APT_OPTS[@]} -gt 0 ]; then  # the tests run apt-get in there too
  printf 'Acquire::Check-Valid-Until "false";\n' > "$ROOT/etc/apt/apt.conf.d/99virtxml-cpu-lab"
fi

# QEMU runs as libvirt-qemu, group kvm, which must be the gid that owns the host's /dev/kvm. Another group
# of the chroot may hold that gid already (forky's crontab): it moves to a free gid first.
kvm_gid=$(stat -c %g /dev/kvm)
holder=$(in_root getent group "$kvm_gid" | cut -d: -f1 || true)
if [ -n "$holder" ] && [ "$holder" != kvm ]; then
  free=$(in_root awk -F: 'BEGIN { g = 900 } { used[$3] = 1 } END { while (g in used) g++; print g }' /etc/group)
  log "moving group $holder from gid $kvm_gid to $free"
  in_root groupmod -g "$free" "$holder"
fi
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
grep -qs '^namespaces *= *\[ *\]' "$conf" || printf '\n# virtxml-cpu test lab (chroot)\nnamespaces = [ ]\n' >> "$conf"

answering() { virsh -c "$URI" version >/dev/null 2>&1; }
if ! answering; then
  sock_ok() { python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' "$1" 2>/dev/null; }
  sock_ok "$ROOT/run/libvirt/virtlogd-sock" || in_root /usr/sbin/virtlogd -d
  in_root /usr/sbin/libvirtd -d  # bullseye ships no libvirtd.conf without libvirt-daemon-system: defaults
  for _ in $(seq 1 150); do answering && break; sleep 0.2; done
fi
answering || { log "libvirtd in $ROOT does not answer"; exit 1; }
log "up: $(virsh -c "$URI" version | sed -n 's/.*Running hypervisor: //p') at $URI"

#!/usr/bin/env bash
# Bring up a real libvirtd + QEMU/KVM lab on a Debian host without systemd (run as root).
# Idempotent: installs the Debian packages if missing, creates the libvirt-qemu user,
# starts virtlogd and libvirtd if they are not answering yet.
set -euo pipefail

. "$(dirname "$0")/need-pkgs.sh"
need_pkgs qemu-system-x86 libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients libvirt-dev pkg-config

getent group kvm >/dev/null || groupadd -r kvm
getent group libvirt-qemu >/dev/null || groupadd -r libvirt-qemu
getent passwd libvirt-qemu >/dev/null || useradd -r -g libvirt-qemu -G kvm -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
# What Debian's udev rule does on a normal host: QEMU runs as libvirt-qemu (group kvm) and needs /dev/kvm.
chgrp kvm /dev/kvm && chmod 0660 /dev/kvm
mkdir -p /var/log/libvirt /var/lib/libvirt/qemu /var/cache/libvirt /run/libvirt /var/lib/libvirt/images

# Also listen on loopback TCP (qemu+tcp://127.0.0.1/system), without auth, for the fleet tests.
conf=/etc/libvirt/libvirtd.conf
if ! grep -q '^listen_tcp *= *1' "$conf" 2>/dev/null; then
  printf '\n# virtxml-cpu test lab: loopback TCP, no auth\nlisten_tls = 0\nlisten_tcp = 1\nlisten_addr = "127.0.0.1"\nauth_tcp = "none"\n' >> "$conf"
fi
listening() { python3 -c 'import socket; socket.create_connection(("127.0.0.1", 16509), 1).close()' 2>/dev/null; }
# The host's daemons by their pidfiles: the chroot labs (up-chroot.sh) run daemons of the same name in a chroot.
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

alive /run/virtlogd.pid || virtlogd -d
if alive /run/libvirtd.pid && ! listening; then
  kill -TERM "$(cat /run/libvirtd.pid)"
  for _ in $(seq 1 100); do alive /run/libvirtd.pid || break; sleep 0.1; done
fi
if ! virsh -c qemu:///system version >/dev/null 2>&1; then
  alive /run/libvirtd.pid || libvirtd -d --listen
  for _ in $(seq 1 100); do
    virsh -c qemu:///system version >/dev/null 2>&1 && break
    sleep 0.2
  done
fi
virsh -c qemu:///system version >/dev/null
echo "lab: libvirtd is up ($(virsh -c qemu:///system version | sed -n 's/.*Running hypervisor: //p'))" >&2

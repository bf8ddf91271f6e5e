"""The /dev/kvm probe: KVM_GET_SUPPORTED_CPUID, the I/O behind the host facts' `cpuid` (decoded by the pure
core/hostfacts.py)."""

from __future__ import annotations

import errno
import fcntl
import os
import struct

from ..constants import KVM_DEVICE
from ..core.hostfacts import ENTRY, HostFacts, decode_supported_cpuid

KVM_GET_SUPPORTED_CPUID = 0xC008AE05  # _IOWR(KVMIO=0xAE, 0x05, struct kvm_cpuid2)


def probe_kvm(device: str = KVM_DEVICE) -> HostFacts:
    """KVM_GET_SUPPORTED_CPUID on /dev/kvm (no QEMU, no libvirt). Empty facts when unavailable."""
    try:
        fd = os.open(device, os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        return HostFacts(unused=(f"{device}: not read ({e.strerror})",))
    try:
        nent = 256
        while nent <= 4096:
            buf = bytearray(struct.pack("=II", nent, 0) + bytes(ENTRY.size * nent))
            try:
                fcntl.ioctl(fd, KVM_GET_SUPPORTED_CPUID, buf, True)
            except OSError as e:
                if e.errno == errno.E2BIG:
                    nent *= 2
                    continue
                return HostFacts(unused=(f"{device}: KVM_GET_SUPPORTED_CPUID failed ({e.strerror})",))
            return HostFacts(cpuid=decode_supported_cpuid(bytes(buf)), sources=(f"{device} (KVM_GET_SUPPORTED_CPUID)",))
        return HostFacts(unused=(f"{device}: KVM_GET_SUPPORTED_CPUID wants more than 4096 entries",))
    finally:
        os.close(fd)

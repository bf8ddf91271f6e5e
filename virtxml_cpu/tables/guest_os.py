"""What the guest's own kernel does with kvm-pv-unhalt, for the OS a domain names (pure data and a matcher).

virt-install and virt-manager record the guest OS as a libosinfo id in the domain's metadata
(`<libosinfo:os id='http://redhat.com/rhel/7.3'/>`). Turning kvm-pv-unhalt on makes a Linux guest take its
PV-spinlock path (kvm_spinlock_init() checks KVM_FEATURE_PV_UNHALT), which kicks halted vCPUs with the
KVM_HC_KICK_CPU hypercall. Each row below is one finding about one OS family and release range, with its
source; no row without one, and an OS with no row is decided as before.

- MISHANDLES: the kernel crashes on that path. Kernels without Linux commit c1118b3602c2 ("x86: kvm: use
  alternatives for VMCALL vs. VMMCALL if kernel text is read-only") issue the Intel VMCALL instruction on every
  host; on AMD, KVM rewrites it to VMMCALL with the guest's own page permissions, and with read-only kernel
  text the guest gets a page fault at the hypercall itself, "a !WRITABLE #PF with CR2 pointing at the RIP of
  the faulting instruction" (lore.kernel.org/kvm/20211210222903.3417968-1-seanjc@google.com; Linux
  f1a9761fbb00's message, 5.19; Mathias Krause's qemu-devel patch for -accel kvm,hypercall-patching=off, 2025).
  KubeVirt added spec.domain.features.pvspinlock for exactly this oops: "BUG: unable to handle kernel paging
  request at ffffffff8104e8f7 ... IP: kvm_kick_cpu+0x27/0x30" (kubevirt/kubevirt#4972). The rows name the
  kernel source; that a distribution built it with PARAVIRT_SPINLOCKS and read-only text (DEBUG_RODATA,
  default y in those trees) is what that oops shows, not read from their build configs.
  Policies compat and numa keep such a domain (decision rule `guest-kernel`); `always` still adds it.
- MAY_MISHANDLE: the id covers releases some of whose kernels are MISHANDLES and some fixed (CentOS 7 has one
  libosinfo id for all of 7.x: http://centos.org/centos/7.0). The decision is unchanged; the note says which
  kernels crash and how to exempt the domain.
- IGNORES: the kernel has no KVM PV-spinlock code, so the bit changes nothing for that guest. The decision is
  unchanged (as for Windows, which uses <hyperv><spinlocks> instead; decision._notes): the bit is harmless to a
  kernel that never reads it, and a guest upgraded in place keeps the id it was installed with.

The id names the release the guest was installed as; a guest updated since may run a newer kernel. That is
what `--policy always` and the per-domain `<vxc:cpu policy='always'/>` (or `'never'`) are for.
"""

from __future__ import annotations

from collections import namedtuple
from functools import lru_cache

from . import lazyre

MISHANDLES = "mishandles-pv-spinlocks"
MAY_MISHANDLE = "some-releases-mishandle-pv-spinlocks"
IGNORES = "no-pv-spinlocks"
EFFECTS = (MISHANDLES, MAY_MISHANDLE, IGNORES)


class GuestKernel(namedtuple("GuestKernel", "prefix first last effect name why source")):
    """One finding: the libosinfo ids `prefix` + version with first <= version <= last (last compared on as
    many parts as it has: (14,) takes in 14.3), what their kernel does, and where that is shown."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    prefix: str  # the libosinfo id up to the version, e.g. "http://redhat.com/rhel/"
    first: tuple[int, ...]
    last: tuple[int, ...]
    effect: str  # one of EFFECTS
    name: str  # how a person calls it
    why: str  # one clause for the note
    source: str  # what shows it (repository@commit:path, commit id, bug)


_RHEL73 = ("kernel-3.10.0-514.el7 (RHEL 7.3, github.com/Shun-Hao/linux-3.10.0-514.el7@b783267f): "
           "arch/x86/kernel/kvm.c kvm_kick_cpu() issues KVM_HC_KICK_CPU through arch/x86/include/asm/kvm_para.h's "
           "bare VMCALL, without Linux c1118b3602c2, which 3.10.0-1127.el7 (7.8) and 3.10.0-1160.el7 (7.9) carry; "
           "KVM patches that VMCALL on AMD with the guest's permissions (Linux f1a9761fbb00's message): the oops "
           "kubevirt/kubevirt#4972 quotes")
_RHEL70 = ("inferred from kernel-3.10.0-514.el7 (RHEL 7.3, github.com/Shun-Hao/linux-3.10.0-514.el7@b783267f), "
           "which still lacks Linux c1118b3602c2: an earlier 7.x kernel cannot carry it")
_CENTOS7 = _RHEL73 + "; CentOS 7 is rebuilt from the same sources"
_RHEL6 = ("kernel-2.6.32-642.6.2.el6 (RHEL 6.8, github.com/functor/linux-2.6.32-642.6.2.el6@310e44f0): no "
          "KVM_FEATURE_PV_UNHALT, KVM_HC_KICK_CPU or KVM spinlock code under arch/x86; earlier 6.x kernels predate "
          "it, and CentOS 6 is rebuilt from the same sources")
_FREEBSD = ("freebsd/freebsd-src@a7dbd117 sys/x86/include/kvm.h: the Linux-KVM feature bits FreeBSD reads are "
            "the kvmclock ones (CLOCKSOURCE, CLOCKSOURCE2, CLOCKSOURCE_STABLE_BIT); no PV_UNHALT")

GUEST_KERNELS: tuple[GuestKernel, ...] = (
    GuestKernel("http://redhat.com/rhel/", (7, 3), (7, 3), MISHANDLES, "RHEL 7.3",
                "its kernel (3.10.0-514.el7) issues the PV-spinlock kick as a bare VMCALL and oopses on AMD hosts "
                "(page fault at kvm_kick_cpu+0x27); kernels from RHEL 7.8 on are fixed", _RHEL73),
    GuestKernel("http://redhat.com/rhel/", (7, 0), (7, 2), MISHANDLES, "RHEL 7.0-7.2",
                "its kernel predates 7.3's, which still issues the PV-spinlock kick as a bare VMCALL: with KVM PV "
                "spinlocks it oopses on AMD hosts as 7.3's does, without them the bit changes nothing", _RHEL70),
    GuestKernel("http://centos.org/centos/", (7, 0), (7, 0), MAY_MISHANDLE, "CentOS 7",
                "this one libosinfo id covers all of CentOS 7.x; the 7.3 kernel (3.10.0-514) oopses on AMD hosts "
                "with kvm-pv-unhalt (page fault at kvm_kick_cpu+0x27), kernels from 7.8 on are fixed", _CENTOS7),
    GuestKernel("http://redhat.com/rhel/", (6, 0), (6, 8), IGNORES, "RHEL 6",
                "its 2.6.32 kernel has no KVM PV spinlocks", _RHEL6),
    GuestKernel("http://centos.org/centos/", (6, 0), (6, 8), IGNORES, "CentOS 6",
                "its 2.6.32 kernel has no KVM PV spinlocks", _RHEL6),
    GuestKernel("http://freebsd.org/freebsd/", (1, 0), (14,), IGNORES, "FreeBSD",
                "its kernel reads only the kvmclock bits of the KVM leaf", _FREEBSD),
)

_VERSIONED = lazyre.compile(r"^(.*/)(\d+(?:\.\d+)*)$")
MAX_ID = 256  # characters: libosinfo's ids are URIs of a few dozen; a longer one names no OS a row covers


def lookup(os_id: str | None) -> GuestKernel | None:
    """The finding for a libosinfo id, or None (no id, an id without a numeric version such as
    http://redhat.com/rhel/7-unknown, or an OS no row covers). An id past MAX_ID is none: it is not kept
    in the cache (a definition may hold a 4 MiB one) and no int() meets thousands of digits."""
    return None if os_id is None or len(os_id) > MAX_ID else _lookup(os_id)


@lru_cache(maxsize=256)
def _lookup(os_id: str) -> GuestKernel | None:
    m = _VERSIONED.match(os_id)
    if not m:
        return None
    prefix, version = m.group(1), tuple(int(p) for p in m.group(2).split("."))
    for row in GUEST_KERNELS:
        if row.prefix == prefix and row.first <= version and version[:len(row.last)] <= row.last:
            return row
    return None


def note(os_id: str, row: GuestKernel) -> str:
    """The sentence a decision carries for a guest a row covers."""
    if row.effect == MISHANDLES:
        return (f"guest {row.name} ({os_id}): {row.why}, so compat and numa leave it without kvm-pv-unhalt; "
                "if it runs a fixed kernel, or only ever on Intel hosts, add it with --policy always or "
                f"<vxc:cpu policy='always'/> in the domain's metadata [{row.source}]")
    if row.effect == MAY_MISHANDLE:
        return (f"guest {row.name} ({os_id}): {row.why}; if this guest still runs an unfixed kernel on AMD "
                f"hosts, exempt it with <vxc:cpu policy='never'/> in the domain's metadata [{row.source}]")
    return f"guest {row.name} ({os_id}): {row.why}, so kvm-pv-unhalt changes nothing for it [{row.source}]"


def record(os_id: str) -> dict:
    """The OS a domain names and what a row knows of its kernel, for JSON (explain, audit)."""
    row = lookup(os_id)
    known = {"name": row.name, "kernel": row.effect, "source": row.source} if row else {}
    return {"libosinfo_id": os_id, **known}

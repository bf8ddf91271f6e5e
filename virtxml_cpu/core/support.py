"""What the accelerator keeps, per property (QEMU's filter against KVM or TCG), with the reason (pure).

Each property's conditions are rows of tables/properties.py (host, tcg, kvm_needs, baseline, CONFIDENTIAL).
"""

from __future__ import annotations

from .domain import DomainFacts
from .hostfacts import HostFacts
from ..tables.properties import BASELINE_SINCE, CONFIDENTIAL, TABLE, Property
from ..tables.qemu import KVM_ACCEL
from ..tables.version import ANY, AS_CURRENT, Version, format_version, in_window


def support(facts: DomainFacts, accel: str, irqchip: str, host: HostFacts) -> dict[str, tuple[bool | None, str]]:
    """What the accelerator keeps, per property (QEMU's filter), with the reason: the rows' conditions."""
    secure = CONFIDENTIAL.get(facts.launch_security or "")
    if secure and accel == KVM_ACCEL and in_window(host.qemu_version, secure.since, None, unknown=AS_CURRENT):
        return {p.name: (False, f"<launchSecurity type='{secure.launch_security}'>: {secure.source} lacks it")
                if p.kvm_leaf and p.name not in secure.keeps else supported(p, accel, irqchip, host)
                for p in TABLE}
    return {p.name: supported(p, accel, irqchip, host) for p in TABLE}


def supported(p: Property, accel: str, irqchip: str, host: HostFacts) -> tuple[bool | None, str]:
    release = host.qemu_version
    if not p.exists_in(release):
        return False, absent(p, release)
    if p.host == "none":
        return True, p.host_why
    if accel != KVM_ACCEL:
        if isinstance(p.tcg, bool):
            return p.tcg, p.tcg_why
        if release is None:
            return None, f"QEMU >= {format_version(p.tcg)} ({p.tcg_why})"
        return in_window(release, p.tcg, None, unknown=ANY), f"{p.tcg_why} (this is {format_version(release)})"
    if p.kvm_needs and irqchip not in p.kvm_needs.irqchips:
        return False, p.kvm_needs.why
    if p.host == "qemu":
        return True, p.host_why
    sup = host.supports(*p.cpuid)
    if sup is None:
        if p.baseline:
            return True, f"every KVM that QEMU >= {format_version(BASELINE_SINCE)} runs on supports it"
        return None, "the host's KVM supports it (not known without /dev/kvm or host facts)"
    return sup, ("the host's KVM supports it" if sup else "the host's KVM does not support it") + " (/dev/kvm)"



def absent(p: Property, release: Version) -> str:
    came = f"it came in {format_version(p.since)} ({p.since_source})"
    gone = f"; removed in {format_version(p.removed)}" if p.removed else ""
    return f"QEMU {format_version(release)} has no {p.name}: {came}{gone}"

"""The decision: add kvm-pv-unhalt or keep the domain as it is, with a reason a person can act on (pure)."""

from __future__ import annotations

from collections import namedtuple

from ..constants import DEFAULT_STYLE
from ..tables import guest_os, libvirt_xml
from . import lifecycle, placement
from .answer import OFF, ON, SRC_CPU_PM, SRC_HIDDEN, SRC_TCG, Resolution
from .machines import PC_FAMILIES, version_at_least
from ..tables.version import format_version
from ..tables import orchestrators

POLICIES = ("compat", "never", "always", "numa")
STYLES = tuple(libvirt_xml.STYLES)
COMPAT_SINCE = (2, 11)  # the seed series: "enables kvm_pv_unhalt by default on pc-*-2.11 and newer"
_COMPAT = format_version(COMPAT_SINCE)
_HINT_SINCE = " and ".join(f"{who} {format_version(v)}" for who, v in libvirt_xml.HINT_DEDICATED_SINCE.items())
X86 = ("x86_64", "i686")
# Every rule a decision can name, in the order decide() tries them (docs/rules.md, "The decision"; the
# suite checks that each one is reached).
DECISION_RULES = ("policy-never", "not-x86", "machine-not-offered", "qemu-refuses", "not-kvm", "user-choice",
                  "qemu-cpu-override", "kvm-hidden", "cpu-pm", "already-on", "machine-family", "cpu-mode",
                  "dedicated-vcpus", "machine-too-old", "machine-version-unknown", "accelerator-unsupported",
                  "numa-single-node", "guest-kernel", "policy-compat", "policy-numa", "policy-always",
                  "metadata-invalid")


class Decision(namedtuple("Decision", "action rule reason policy notes",
                          defaults=((),))):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    action: str  # inject | keep
    rule: str  # short id of the rule that decided
    reason: str
    policy: str
    notes: tuple[str, ...]


def invalid_exemption(value: str) -> Decision:
    """A per-domain <vxc:cpu policy=...> that is not a policy: leave the domain alone and say why."""
    shown = value if value.isprintable() else repr(value)
    return Decision("keep", "metadata-invalid",
                    f"<vxc:cpu policy='{shown}'> in the domain's metadata is not one of {', '.join(POLICIES)}; "
                    "the domain is left unchanged until it is corrected", "never")


def decide(res: Resolution, policy: str, style: str = DEFAULT_STYLE) -> Decision:
    """Decide from the resolution and its provenance only: what QEMU/KVM did with kvm-pv-unhalt and why,
    and whether the accelerator could provide it (`res.support`). The domain's name and uuid are not read
    (pipeline keeps one decision for a template's clones)."""
    placed = placement.read(res.facts)  # once per decision: a placement of megabytes is not kept between calls
    notes = _notes(res, style, placed)
    unhalt = res.features["kvm-pv-unhalt"]
    can_have, why_not = res.support["kvm-pv-unhalt"]

    def keep(rule: str, reason: str) -> Decision:
        return Decision("keep", rule, reason, policy, notes)

    if policy == "never":
        return keep("policy-never", "policy 'never': report only")
    arch = res.facts.arch
    if arch and arch not in X86:
        return keep("not-x86", f"arch {arch}: kvm-pv-unhalt is an x86 CPUID bit")
    if res.machine_status == lifecycle.NOT_OFFERED:
        return keep("machine-not-offered", f"{res.machine_status_why}, so it will not start this guest at all: change "
                                           "its machine type (<os><type machine=...>) to one this QEMU offers")
    if res.qemu_refusal:
        return keep("qemu-refuses", f"QEMU will not start this domain: {res.qemu_refusal} (<qemu:commandline>); "
                                    "write it in a form this QEMU takes (docs/rules.md, QEMU's -cpu grammar)")
    if res.accel != "kvm" or unhalt.source == SRC_TCG:
        return keep("not-kvm", f"domain type '{res.facts.virt_type}' is not KVM: QEMU clears the KVM leaf under "
                               "TCG, so there is nothing to add")
    if res.explicit_unhalt:
        return keep("user-choice", f"already chosen explicitly by {res.explicit_unhalt}; an explicit choice wins")
    if res.cpu_from_commandline:
        return keep("qemu-cpu-override", "<qemu:commandline> passes its own -cpu, which replaces libvirt's; "
                                          "add kvm-pv-unhalt=on to that -cpu yourself")
    if unhalt.source == SRC_HIDDEN:
        return keep("kvm-hidden", "<kvm><hidden state='on'/> removes the whole KVM leaf (kvm=off)")
    if unhalt.source == SRC_CPU_PM:
        return keep("cpu-pm", unhalt.detail)
    if unhalt.state == ON:
        return keep("already-on", f"kvm-pv-unhalt is already on ({unhalt.source}: {unhalt.detail})")
    if res.machine.family not in PC_FAMILIES:
        return keep("machine-family", f"machine {res.machine.label()} is not pc-i440fx/pc-q35; "
                                      "the rule covers the PC machine types only")
    if res.cpu_kind != "named":
        return keep("cpu-mode", f"CPU mode {res.facts.cpu_mode}: QEMU already decides kvm-pv-unhalt from the host")
    dedicated = _dedicated_vcpus(res, policy, placed)
    if dedicated:
        return keep("dedicated-vcpus", dedicated)
    if policy in ("compat", "numa"):
        newer = version_at_least(res.machine, COMPAT_SINCE)
        if newer is False:
            return keep("machine-too-old",
                        f"machine {res.machine.label()} is older than {_COMPAT}: the compat rule leaves older machine "
                        "types as they are (guest ABI unchanged); use --policy always to add it anyway")
        if newer is None:
            return keep("machine-version-unknown",
                        f"cannot tell whether machine {res.machine.label()} is {_COMPAT} or newer ({res.machine.how}); "
                        "the decision assumes nothing and leaves it unchanged; give --connect, --emulator or "
                        "--capabilities, or use --policy always")
    if can_have is False:
        return keep("accelerator-unsupported", f"adding it would not help: {why_not}; libvirt would refuse the "
                                               f"start ('{libvirt_xml.BY_KEY['pvspinlock'].verified}')")
    if policy == "numa" and res.facts.numa_cells <= 1:
        return keep("numa-single-node", f"policy 'numa': {res.facts.numa_cells or 'no'} guest NUMA cell(s); "
                                        "only multi-node guests get it")
    guest = guest_os.lookup(res.facts.os_id)
    if policy in ("compat", "numa") and guest is not None and guest.effect == guest_os.MISHANDLES:
        return keep("guest-kernel", f"the domain names its OS {guest.name} ({res.facts.os_id}), whose kernel is "
                                    "known to mishandle KVM PV spinlocks (see the note)")
    why = {"compat": f"machine {res.machine.label()} is {_COMPAT} or newer",
           "numa": f"machine {res.machine.label()} is {_COMPAT} or newer and the guest has {res.facts.numa_cells} NUMA cells",
           "always": "policy 'always'"}[policy]
    where = libvirt_xml.STYLES[style].text
    return Decision("inject", f"policy-{policy}",
                    f"kvm-pv-unhalt is {unhalt.state} ({unhalt.source}) and {why}: adding {where}; "
                    "it takes effect at the guest's next cold boot", policy, notes)


# Rule dedicated-vcpus: a guest whose every vCPU has a host CPU of its own (core/placement.py) keeps native spinlocks.
# Kernel bugzilla 207357 (48-vCPU guest, RocksDB): 18% of bare metal with KVM_FEATURE_PV_UNHALT, close to it with
# <pvspinlock state='off'/> or <kvm><hint-dedicated state='on'/>; Linux arch/x86/kernel/kvm.c (torvalds/linux
# ba3bdbe0db) kvm_spinlock_init: "PV spinlocks disabled with KVM_HINTS_REALTIME hints", native qspinlock.
DEDICATED_REASON = ("policy '{policy}': every vCPU has a host CPU of its own (see the note), where a lock holder's "
                    "vCPU is not preempted and PV spinlocks only cost (kernel bugzilla 207357: 18% of bare metal with "
                    "PV_UNHALT, close to it without): kvm-pv-unhalt is not added; {then}")
DEDICATED_HINT = (f"on dedicated host CPUs use {libvirt_xml.HINT_DEDICATED} instead: libvirt writes "
                  "kvm-hint-dedicated=on and the guest reads KVM_HINTS_REALTIME (CPUID 0x40000001 EDX bit 0); Linux "
                  "then uses no PV spinlocks even where PV_UNHALT is present ('PV spinlocks disabled with "
                  "KVM_HINTS_REALTIME hints') and skips PV TLB flush and PV sched-yield (arch/x86/kernel/kvm.c "
                  "kvm_spinlock_init, pv_tlb_flush_supported); it needs "
                  f"{_HINT_SINCE} under KVM and no particular CPU mode: libvirt 9.0/QEMU 7.2 and 11.3/10.0 start "
                  "it with a named model, host-model and host-passthrough alike, and the guest reads EDX bit 0 set "
                  "(none under TCG or with <kvm><hidden state='on'/>)")


def _dedicated_vcpus(res: Resolution, policy: str, placed: placement.Pinning) -> str | None:
    """Rule dedicated-vcpus: under compat and numa, the reason to keep a guest on dedicated host CPUs."""
    if policy not in ("compat", "numa") or not placed.dedicated:
        return None
    hinted = res.features["kvm-hint-dedicated"].state == ON
    return DEDICATED_REASON.format(policy=policy, then="<kvm><hint-dedicated state='on'/> already tells the guest so"
                                   if hinted else "the note names the hint to use instead")


def _placement_notes(res: Resolution, placed: placement.Pinning) -> list[str]:
    """What the domain's vCPU placement means for the decision, when it writes any."""
    f = res.facts
    if not placed.written:
        return []
    if not placed.dedicated:
        return [f"vCPU placement: not on dedicated host CPUs: {placed.why}"]
    notes = [f"dedicated host CPUs: {placed.why}"]
    if res.features["kvm-hint-dedicated"].state != ON:
        notes.append(DEDICATED_HINT)
    if f.orchestrator and orchestrators.DEDICATED_NOTES.get(f.orchestrator):
        notes.append(f"managed by {f.orchestrator}, on dedicated CPUs: {orchestrators.DEDICATED_NOTES[f.orchestrator]}")
    return notes


def stack_note(name: str) -> str:
    """What the stack that wrote the definition means for it: whether a change made in libvirt lasts (the
    stack's knob itself is data: tables/orchestrators.record, shown beside the notes)."""
    s = orchestrators.BY_NAME[name]
    if s.managed:
        return f"managed by {s.name}: {s.edits_why}; the fix is {s.name}'s own knob, not an edit here"
    return f"written by {s.name}: {s.edits_why}"


def fixable(changes: bool, persistent: bool, stack: str | None, include_managed: bool = False) -> bool:
    """Whether `apply` changes this guest: it needs the change, has a persistent definition to change, and no
    stack writes that definition again (unless the admin asks for it anyway: --include-managed). The one
    answer apply, audit's `fix with:` line and the records give."""
    return changes and persistent and (include_managed or not orchestrators.managed(stack))


def _notes(res: Resolution, style: str, placed: placement.Pinning) -> tuple[str, ...]:
    f = res.facts
    notes: list[str] = list(res.warnings)
    if res.machine_status == lifecycle.DEPRECATED:
        notes.append(f"machine type {res.machine.label()} is deprecated: {res.machine_status_why}; a later QEMU "
                     "will not offer it, so plan a change of machine type")
    if f.orchestrator:
        notes.append(stack_note(f.orchestrator))
    notes.extend(_placement_notes(res, placed))
    if f.vcpus <= 1:
        notes.append("1 vCPU: Linux guests do not use PV spinlocks on a single CPU (kvm_spinlock_init)")
    if res.features["kvm-hint-dedicated"].state == ON:
        notes.append("kvm hint-dedicated (KVM_HINTS_REALTIME): Linux guests keep native spinlocks")
    guest = guest_os.lookup(f.os_id)
    if guest is not None:
        notes.append(guest_os.note(f.os_id, guest))
    if f.looks_windows:
        notes.append("Windows guest: it does not use KVM PV spinlocks; its enlightenment is <hyperv><spinlocks>"
                     + (" (already on)" if f.hyperv_spinlocks else ", e.g. <spinlocks state='on' retries='8191'/>"))
    if style == "cpu-feature":
        notes.append(f"style cpu-feature: {libvirt_xml.NOT_IN_CPU_MAP_NOTE}; prefer --style pvspinlock")
    unhalt = res.features["kvm-pv-unhalt"]
    if unhalt.qom == ON and unhalt.state == OFF:
        notes.append(f"QEMU sets kvm-pv-unhalt, but {unhalt.detail}")
    return tuple(notes)



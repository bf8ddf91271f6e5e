"""Where libvirt runs a domain's vCPUs, and whether each has a host CPU of its own (pure).

A vCPU's host CPUs are its <vcpupin>, else numad's choice with <vcpu placement='auto'>, else <vcpu cpuset>,
else every host CPU (libvirt virDomainDefGetVcpuPinInfoHelper, qemuProcessSetupPid). The domain is on
dedicated CPUs when every vCPU up to <vcpu> has exactly one host CPU and no two vCPUs have the same one.
<emulatorpin> places QEMU's other threads and <vcpusched> only sets a scheduler: neither makes a vCPU
dedicated or stops it being so. Elements libvirt refuses make nothing dedicated (`error` says why).

Host CPU sets are int bitmasks (cpuset.mask; bit N: host CPU N): 16384 <vcpupin cpuset='0-16383'> cost
16384 ints of 2 KiB, not 16384 sets of 16384 numbers (gigabytes).
"""

from __future__ import annotations

from functools import lru_cache
from collections import namedtuple

from . import cpuset
from ..tables.libvirt_xml import PLACEMENT_BY_KEY, Placement

SCHEDULERS = ("batch", "idle", "fifo", "rr")  # virProcessSchedPolicy without "none" (VIR_XML_PROP_NONZERO)
REALTIME = ("fifo", "rr")
# More vCPUs than host CPU numbers libvirt accepts (VIR_DOMAIN_CPUMASK_LEN) cannot each have one of their own.
TOO_MANY = f"{{n}} vCPUs are more than the {cpuset.CPUMASK_LEN} host CPU numbers libvirt accepts, so not every one has its own"
SHOWN_PAIRS = 8  # vCPU -> host CPU pairs a sentence lists before it abbreviates


class Refused(Exception):
    """libvirt's own message for placement elements it refuses to define."""


class Pinning(namedtuple("Pinning", "written vcpus affinity emulator realtime error dedicated why")):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    written: bool  # the domain places anything (a PLACEMENT element beyond a bare <vcpu>)
    vcpus: int
    affinity: tuple[int | None, ...]  # per vCPU id: its host CPUs (a mask); None: not placed by the XML; () above TOO_MANY
    emulator: int | None  # <emulatorpin>: host CPUs (a mask)
    realtime: int  # vCPU ids under a fifo/rr <vcpusched> (a mask)
    error: str | None  # libvirt's refusal, when it refuses these elements
    dedicated: bool
    why: str  # one sentence: what makes it dedicated, or the first thing that does not


KEPT_TEXT = 4096  # characters of cpuset text up to which a placement is kept (a 4 MiB one is read each time)


def read(facts) -> Pinning:
    """The placement of a DomainFacts' vCPUs (kept per distinct placement: clones share it; a placement of
    more than KEPT_TEXT characters is not kept, so a long-lived `watch` keeps no 4 MiB cpuset per definition)."""
    if sum(len(p.cpus or "") + sum(len(a or "") for a in p.attrs) for p in facts.placement) > KEPT_TEXT:
        return _read.__wrapped__(facts.placement, facts.vcpus)
    return _read(facts.placement, facts.vcpus)


def _cpus(row: Placement, text: str) -> int:
    try:
        cpus = cpuset.mask(text)
    except cpuset.CpusetError as e:
        raise Refused(str(e)) from None
    if not cpus:
        raise Refused(row.empty.format(v=text))
    return cpus


def _vcpu_id(text: str | None) -> int:
    """virXMLPropUInt(node, "vcpu", 10, VIR_XML_PROP_REQUIRED) via virStrToLong_uip."""
    if text is None:
        raise Refused("Missing required attribute 'vcpu' in element 'vcpupin'")
    digits = text.lstrip(" \t\n\v\f\r")
    digits = digits[1:] if digits.startswith("+") else digits
    digits = digits and (digits.lstrip("0") or "0")  # strtoul reads leading zeros; int() refuses more than 4300 digits
    if not digits.isascii() or not digits.isdigit() or len(digits) > 10 or int(digits) > 2**32 - 1:
        raise Refused(f"Invalid value for attribute 'vcpu' in element 'vcpupin': '{text}'. "
                      "Expected non-negative integer value")
    return int(digits)


@lru_cache(maxsize=1024)
def _read(placement: tuple, vcpus: int) -> Pinning:
    default: int | None = None
    auto = False
    pins: dict[int, int] = {}
    emulator: int | None = None
    scheduled = 0
    realtime = 0
    error = None
    try:
        for p in placement:
            row = PLACEMENT_BY_KEY[p.key]
            if p.key == "vcpu-cpuset":
                mode = p.attrs[0] or "static"
                if mode not in ("static", "auto"):
                    raise Refused(f"Invalid value for attribute 'placement' in element 'vcpu': '{mode}'.")
                auto = mode == "auto"
                if not auto and p.cpus is not None:
                    default = _cpus(row, p.cpus)
            elif p.key == "vcpupin":
                vcpu = _vcpu_id(p.attrs[0])
                if vcpu >= vcpus:
                    continue  # libvirt: "Ignoring vcpupin for missing vcpus"
                if p.cpus is None:
                    raise Refused(row.missing)
                if vcpu in pins:
                    raise Refused(f"duplicate vcpupin for vcpu '{vcpu}'")
                pins[vcpu] = _cpus(row, p.cpus)
            elif p.key == "emulatorpin":
                if emulator is not None:
                    raise Refused(row.single)
                if p.cpus is None:
                    raise Refused(row.missing)
                emulator = _cpus(row, p.cpus)
            elif p.key == "vcpusched":
                if p.cpus is None:
                    raise Refused(row.missing)
                ids = _cpus(row, p.cpus)
                scheduler = p.attrs[0]
                if scheduler is None:
                    raise Refused("Missing required attribute 'scheduler' in element 'vcpusched'")
                if scheduler not in SCHEDULERS:
                    raise Refused(f"Invalid value for attribute 'scheduler' in element 'vcpusched': '{scheduler}'.")
                absent, overlap = ids >> vcpus << vcpus, ids & scheduled  # libvirt checks ids in ascending order
                first = _lowest(absent | overlap)
                if first is not None:
                    raise Refused(f"vCPU '{first}' is not present in domain definition" if absent >> first & 1
                                  else "'vcpusched' attributes 'vcpus' must not overlap")
                scheduled |= ids
                if scheduler in REALTIME:
                    realtime |= ids
    except Refused as e:
        error = str(e)
    written = any(p.key != "vcpu-cpuset" or p.cpus is not None or p.attrs[0] not in (None, "static")
                  for p in placement)  # <vcpu placement='static'> without a cpuset places nothing
    if vcpus > cpuset.CPUMASK_LEN and not error:  # no per-vCPU tuple of a <vcpu> count a file may make huge
        return Pinning(written, vcpus, (), emulator, realtime, error, False, TOO_MANY.format(n=vcpus))
    affinity = tuple(pins.get(i, None if auto else default) for i in range(vcpus))
    how = tuple("<vcpupin>" if i in pins else "placement='auto'" if auto else
                "<vcpu cpuset>" if default is not None else "" for i in range(vcpus))
    dedicated, why = _judge(affinity, how, auto, emulator, realtime, error, bool(pins))
    return Pinning(written, vcpus, affinity, emulator, realtime, error, dedicated, why)


def _judge(affinity, how, auto, emulator, realtime, error, pinned) -> tuple[bool, str]:
    n = len(affinity)
    if error:
        return False, f"libvirt refuses these placement elements ('{error}')"
    alone = ""
    if not pinned and all(a is None for a in affinity):
        alone = "".join(f"{what} alone places no vCPU; " for what, there in (
            ("realtime <vcpusched>", realtime), ("<emulatorpin> (QEMU's emulator threads)", emulator)) if there)
    free = [i for i, a in enumerate(affinity) if a is None]
    if free:
        if auto:
            return False, (f"{alone}{_count(free, n)} without a <vcpupin> run where numad places them "
                           "(<vcpu placement='auto'>), not on host CPUs of their own")
        return False, (f"{alone}{_count(free, n)} without a <vcpupin> or <vcpu cpuset> run on any host CPU, "
                       "not on one of their own")
    for i, a in enumerate(affinity):
        if a & (a - 1):  # more than one bit
            return False, (f"vCPU {i} may run on host CPUs {cpuset.format(a)} ({how[i]}), a range it shares, "
                           "not on one host CPU of its own")
    owners: dict[int, list[int]] = {}
    for i, a in enumerate(affinity):
        owners.setdefault(_lowest(a), []).append(i)
    for cpu, vcpus in owners.items():
        if len(vcpus) > 1:
            return False, (f"vCPUs {', '.join(map(str, vcpus))} share host CPU {cpu} "
                           f"({', '.join(sorted({how[i] for i in vcpus}))}), so they preempt each other")
    pairs = ", ".join(f"{i}->{_lowest(a)}" for i, a in enumerate(affinity[:SHOWN_PAIRS]))
    if n > SHOWN_PAIRS:
        pairs += f", ... ({n} in all)"
    why = f"each of its {n} vCPU(s) is pinned to a host CPU of its own (vCPU {pairs})"
    if emulator is not None:
        mine = 0
        for a in affinity:
            mine |= a
        where = "apart from the vCPUs" if not emulator & mine else "on the vCPUs' host CPUs too"
        why += f"; emulator threads on {cpuset.format(emulator)} ({where})"
    if realtime:
        why += f"; vCPU(s) {cpuset.format(realtime)} under a realtime <vcpusched>"
    return True, why


def _lowest(cpus: int) -> int | None:
    """The lowest bit of a mask, None for none."""
    return (cpus & -cpus).bit_length() - 1 if cpus else None


def _count(ids: list[int], n: int) -> str:
    shown = ", ".join(map(str, ids[:SHOWN_PAIRS])) + (", ..." if len(ids) > SHOWN_PAIRS else "")
    return f"{len(ids)} of {n} vCPU(s) (vCPU {shown})"

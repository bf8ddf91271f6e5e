"""What resolution answers, per domain: each property's Value and the whole Resolution (plain named tuples).

The steps that fill them are core/property_steps.py; core/resolve.py runs them.
"""

from __future__ import annotations

from collections import namedtuple

from . import lifecycle
from .domain import DomainFacts
from .hostfacts import HostFacts
from .machines import Machine

ON, OFF, HOST = "on", "off", "host-dependent"

# Provenance tags a policy may act on.
SRC_TCG, SRC_HIDDEN, SRC_CPU_PM = "tcg", "kvm-hidden", "kvm-cpu-pm"
SRC_FILTERED, SRC_BUILD, SRC_ABSENT = "filtered", "qemu-build", "qemu-release"


class Value(namedtuple("Value", "state source detail qom",
                       defaults=(None,))):
    """One property's answer (a tuple: 18 are built per domain)."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    state: str  # on | off | host-dependent
    source: str  # where the value comes from, short
    detail: str  # why, with the QEMU/libvirt/KVM reference
    qom: str | None  # what QMP qom-get reports, when KVM changes it afterwards (cpu-pm)

    @property
    def qemu_property(self) -> str:
        return self.qom or self.state


class Resolution(namedtuple("Resolution", "facts machine accel irqchip cpu_kind model features "
                            "explicit_unhalt warnings start_refusal host build build_basis support "
                            "cpu_from_commandline machine_status machine_status_why qemu_refusal",
                            defaults=((), None, HostFacts(), "upstream", "", {}, False, lifecycle.OFFERED, "", None,))):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    facts: DomainFacts
    machine: Machine
    accel: str  # kvm | tcg | other
    irqchip: str  # on | split | off
    cpu_kind: str  # named | host | max
    model: str | None  # QEMU CPU model for named CPUs
    features: dict[str, Value]
    explicit_unhalt: str | None  # who chose kvm-pv-unhalt explicitly, if anyone
    warnings: tuple[str, ...]
    start_refusal: str | None  # libvirt's error when it will refuse to start the domain
    host: HostFacts
    build: str  # the QEMU build assumed; "a|b" when unknown and the answers were merged
    build_basis: str  # why that build
    support: dict[str, tuple[bool | None, str]]  # would the accelerator keep it (never mutated)
    cpu_from_commandline: bool  # <qemu:commandline> -cpu replaced libvirt's -cpu
    machine_status: str  # offered | deprecated | not-offered (core/lifecycle.py)
    machine_status_why: str
    qemu_refusal: str | None  # QEMU's own error when it refuses a <qemu:commandline> spelling


def state(v: bool | None) -> str:
    return HOST if v is None else (ON if v else OFF)

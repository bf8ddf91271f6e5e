"""Orchestrators that generate a domain's definition: how to recognise them (the metadata element they
write) and what a change made in libvirt means for their guests."""

from __future__ import annotations

from collections import namedtuple


class Orchestrator(namedtuple("Orchestrator", "name namespace element note")):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    name: str
    namespace: str  # the metadata namespace, matched as a prefix (Nova versions it)
    element: str
    note: str


ORCHESTRATORS: tuple[Orchestrator, ...] = (
    Orchestrator("OpenStack Nova", "http://openstack.org/xmlns/libvirt/nova/", "instance",
                 "Nova writes this definition again at hard reboot, resize, migration and rebuild, so a change made "
                 "here does not last; the setting belongs in Nova's configuration"),
    Orchestrator("oVirt/VDSM", "http://ovirt.org/vm/", "vm",
                 "VDSM builds this definition from the engine's data at every start, so a change made here does not "
                 "last; the setting belongs in oVirt (a VDSM before_vm_start hook)"),
    Orchestrator("KubeVirt", "http://kubevirt.io", "kubevirt",
                 "virt-launcher builds this definition from the VirtualMachineInstance, so a change made here does "
                 "not last; set spec.domain.features.pvspinlock in the VMI"),
)
NOTES: dict[str, str] = {o.name: o.note for o in ORCHESTRATORS}

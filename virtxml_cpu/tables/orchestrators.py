"""Orchestrators that generate a domain's definition: how to recognise them (the metadata element they
write) and what a change made in libvirt means for their guests."""

from __future__ import annotations

from collections import namedtuple


class Orchestrator(namedtuple("Orchestrator", "name namespace element note dedicated")):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    name: str
    namespace: str  # the metadata namespace, matched as a prefix (Nova versions it)
    element: str
    note: str
    dedicated: str  # which of its settings would carry <kvm><hint-dedicated> for a guest on dedicated CPUs


ORCHESTRATORS: tuple[Orchestrator, ...] = (
    Orchestrator("OpenStack Nova", "http://openstack.org/xmlns/libvirt/nova/", "instance",
                 "Nova writes this definition again at hard reboot, resize, migration and rebuild, so a change made "
                 "here does not last; the setting belongs in Nova's configuration",
                 # openstack/nova 00a030403f: driver.py _get_pin_cpuset (one <vcpupin> per vCPU, one host CPU
                 # each, for hw:cpu_policy=dedicated), designer.py set_vcpu_realtime_scheduler (hw:cpu_realtime),
                 # driver.py _set_features + core/config.py LibvirtConfigGuestFeatureKvmHidden (its only <kvm> child).
                 "Nova writes these pins for hw:cpu_policy=dedicated (nova/virt/libvirt/driver.py _get_pin_cpuset: "
                 "one <vcpupin> per vCPU, each to its own host CPU) and a fifo <vcpusched> for hw:cpu_realtime "
                 "(designer.py set_vcpu_realtime_scheduler), but no flavor extra spec or image property writes "
                 "<kvm><hint-dedicated> (openstack/nova 00a030403f: the only <kvm> child it writes is <hidden>, for "
                 "hw:hide_hypervisor_id; [libvirt]cpu_model_extra_flags names CPU-map features, and libvirt's CPU "
                 "map has no KVM leaf bits), so no Nova setting carries the hint"),
    Orchestrator("oVirt/VDSM", "http://ovirt.org/vm/", "vm",
                 "VDSM builds this definition from the engine's data at every start, so a change made here does not "
                 "last; the setting belongs in oVirt (a VDSM before_vm_start hook)",
                 "no oVirt setting that writes <kvm><hint-dedicated> is known to this tool (VDSM's source was not "
                 "read); a VDSM before_vm_start hook can add it"),
    Orchestrator("KubeVirt", "http://kubevirt.io", "kubevirt",
                 "virt-launcher builds this definition from the VirtualMachineInstance, so a change made here does "
                 "not last; set spec.domain.features.pvspinlock in the VMI",
                 # kubevirt/kubevirt 0523d9b0e9: pkg/virt-launcher/virtwrap/converter/vcpu/vcpu.go
                 # AdjustDomainForTopologyAndCPUSet.
                 "virt-launcher adds <kvm><hint-dedicated state='on'/> itself to amd64 VMIs with "
                 "spec.domain.cpu.dedicatedCpuPlacement: true (pkg/virt-launcher/virtwrap/converter/vcpu/vcpu.go, "
                 "AdjustDomainForTopologyAndCPUSet), so that setting carries it"),
)
NOTES: dict[str, str] = {o.name: o.note for o in ORCHESTRATORS}
DEDICATED_NOTES: dict[str, str] = {o.name: o.dedicated for o in ORCHESTRATORS}

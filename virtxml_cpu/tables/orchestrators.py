"""The stacks that write libvirt domain definitions: how a definition shows which one wrote it, whether a
change made in libvirt lasts there, and the knob that turns kvm-pv-unhalt on in the stack's own terms.

Each row was read from the stack's own source at the commit named in `source`; what could not be checked
there is named in `unchecked` (docs/orchestrators.md prints the table). A row with no `metadata` and no
`sysinfo` is never recognised in a definition: it is here for the docs and for an admin who knows the
stack. A name pattern alone (`one-<id>`, `i-2-34-VM`, `NAMESPACE_NAME`, `instance-0000002a`) is never
enough: anyone may name a guest so, and the stacks that start transient domains (OpenNebula, CloudStack)
are covered without recognition by the hook's transient check. `weak` records those patterns.
"""

from __future__ import annotations

from collections import namedtuple

HOST_PASSTHROUGH_COST = ("host-passthrough: live migration only between hosts with identical CPUs and "
                         "microcode (the guest sees the host's CPU as it is)")


class Stack(namedtuple("Stack", "name recognised_by metadata sysinfo weak edits_last edits_why knob knob_since "
                       "default cost source unchecked dedicated")):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    name: str
    recognised_by: str  # said to a person
    metadata: tuple[tuple[str, str], ...]  # (namespace prefix, element): a child of <metadata> that names it
    sysinfo: tuple[tuple[str, str], ...]  # (<sysinfo><system><entry name=...>, text): any one names it
    weak: str  # signals that are not enough alone (names), and why
    edits_last: bool  # does a change made in libvirt (virsh edit, apply) survive the stack's next start
    edits_why: str  # what the stack does with the definition
    knob: str  # what turns kvm-pv-unhalt on in the stack, exact syntax
    knob_since: str | None  # the release that added the knob (None: not known)
    default: str  # what the stack gives a guest unless told
    cost: str | None  # what the knob costs (None: nothing)
    source: str  # repository, commit and files of the facts above
    unchecked: str  # facts of this row that could not be read from the source here ("" when none)
    dedicated: str  # which of its settings carries <kvm><hint-dedicated> for a guest on dedicated CPUs

    @property
    def recognisable(self) -> bool:
        return bool(self.metadata or self.sysinfo)

    @property
    def managed(self) -> bool:
        """The stack writes the definition again: the tool does not edit it, it names the knob."""
        return not self.edits_last


STACKS: tuple[Stack, ...] = (
    Stack(
        "OpenStack Nova",
        "<nova:instance> in <metadata>, namespace http://openstack.org/xmlns/libvirt/nova/ (versioned: 1.0, 1.1)",
        (("http://openstack.org/xmlns/libvirt/nova/", "instance"),), (),
        "names instance-%08x ([DEFAULT] instance_name_template, which an operator may change)",
        False,
        "Nova writes this definition again from its own data at hard reboot, resize, rebuild, migration and at "
        "`openstack server start` after a stop (driver.py _hard_reboot -> _get_guest_xml), so a change made in "
        "libvirt does not last",
        "nova.conf on each compute node: [libvirt] cpu_mode = host-passthrough (QEMU's -cpu host has "
        "kvm-pv-unhalt). No flavor extra spec or image property writes <pvspinlock>; [libvirt] "
        "cpu_model_extra_flags writes <cpu><feature>, and libvirt's CPU map has no kvm_pv_unhalt",
        None,
        "[libvirt] cpu_mode = host-model with virt_type = kvm: off",
        HOST_PASSTHROUGH_COST,
        "openstack/nova 00a030403f: nova/virt/libvirt/config.py (NOVA_NS, the guest feature classes: ACPI, APIC, "
        "KvmHidden, SMM, TCG, PMU, IOAPIC, HyperV, VMCoreInfo), nova/virt/libvirt/driver.py (_hard_reboot, "
        "_get_guest_xml), nova/conf/libvirt.py (cpu_mode, cpu_model_extra_flags: any flag with host-model since "
        "18.0.0 Rocky, cc27a2007f)",
        "knob_since: the release that first had cpu_mode = host-passthrough was not read",
        # openstack/nova 00a030403f: driver.py _get_pin_cpuset (one <vcpupin> per vCPU, one host CPU
        # each, for hw:cpu_policy=dedicated), designer.py set_vcpu_realtime_scheduler (hw:cpu_realtime),
        # driver.py _set_features + core/config.py LibvirtConfigGuestFeatureKvmHidden (its only <kvm> child).
        "Nova writes these pins for hw:cpu_policy=dedicated (nova/virt/libvirt/driver.py _get_pin_cpuset: "
        "one <vcpupin> per vCPU, each to its own host CPU) and a fifo <vcpusched> for hw:cpu_realtime "
        "(designer.py set_vcpu_realtime_scheduler), but no flavor extra spec or image property writes "
        "<kvm><hint-dedicated> (openstack/nova 00a030403f: the only <kvm> child it writes is <hidden>, for "
        "hw:hide_hypervisor_id; [libvirt]cpu_model_extra_flags names CPU-map features, and libvirt's CPU "
        "map has no KVM leaf bits), so no Nova setting carries the hint"),
    Stack(
        "oVirt/VDSM",
        "<ovirt-vm:vm> (namespace http://ovirt.org/vm/1.0, VDSM) or <ovirt-tune:qos> (namespace "
        "http://ovirt.org/vm/tune/1.0, the engine) in <metadata>",
        (("http://ovirt.org/vm/1.0", "vm"), ("http://ovirt.org/vm/tune/1.0", "qos")), (),
        "names are the VM's name in the engine: nothing distinctive",
        False,
        "the engine builds this definition (LibvirtVmXmlBuilder) for every run and VDSM creates the domain from "
        "it, so a change made in libvirt does not last",
        "VM > Edit > Host > 'Pass-Through Host CPU' (host-passthrough); or a VDSM before_vm_start hook that adds "
        "<pvspinlock state='on'/> to the domain XML (docs/orchestrators.md, XML hooks). The custom property "
        "extra_cpu_flags and the cpuflags VDSM hook write <cpu><feature>, where libvirt has no kvm_pv_unhalt",
        None,
        "the cluster's CPU type (a named model): off",
        HOST_PASSTHROUGH_COST + "; the VM is pinned to its host unless the cluster's hosts are identical",
        "oVirt/ovirt-engine 0111fc63: backend/.../builder/vminfo/LibvirtVmXmlBuilder.java (OVIRT_URI "
        "http://ovirt.org/vm/tune/1.0, writeFeatures writes no <pvspinlock>); oVirt/vdsm fd4b0df2: "
        "lib/vdsm/virt/metadata.py (http://ovirt.org/vm/1.0), lib/vdsm/hook/hooks.py (before_vm_start, "
        "_hook_domxml)",
        "knob_since: the release that added Pass-Through Host CPU was not read",
        "no oVirt setting that writes <kvm><hint-dedicated> is known to this tool (VDSM's source was not "
        "read); a VDSM before_vm_start hook can add it"),
    Stack(
        "KubeVirt",
        "<kubevirt> in <metadata>, namespace http://kubevirt.io (virt-launcher; the host's libvirt does not "
        "list these guests, the pod's does)",
        (("http://kubevirt.io", "kubevirt"),), (),
        "names NAMESPACE_NAME (VMINamespaceKeyFunc): an underscore is common in other names",
        False,
        "virt-launcher builds this definition from the VirtualMachineInstance at every launch, and the VMI from "
        "the VirtualMachine, so a change made in libvirt does not last",
        "the VirtualMachine's spec.template.spec.domain.features.pvspinlock: {} (enabled defaults to true); "
        "the VMI is generated from it",
        "v0.39.0",
        "the field absent, the CPU host-model: off",
        None,
        "kubevirt/kubevirt d923fdb815: staging/src/kubevirt.io/api/core/v1/schema.go (Features.Pvspinlock), "
        "pkg/virt-launcher/virtwrap/converter/compute/hypervisor_features.go; ed72bb64ed: "
        "pkg/virt-launcher/virtwrap/api/schema.go (Metadata `http://kubevirt.io kubevirt`: uid, graceperiod, "
        "migration; no name or namespace), VMINamespaceKeyFunc (the domain's name: NAMESPACE_NAME) and "
        "SplitVMINamespaceKey (split at the first underscore); 89afc6df41 (v0.39.0)",
        "",
        # kubevirt/kubevirt 0523d9b0e9: pkg/virt-launcher/virtwrap/converter/vcpu/vcpu.go
        # AdjustDomainForTopologyAndCPUSet.
        "virt-launcher adds <kvm><hint-dedicated state='on'/> itself to amd64 VMIs with "
        "spec.domain.cpu.dedicatedCpuPlacement: true (pkg/virt-launcher/virtwrap/converter/vcpu/vcpu.go, "
        "AdjustDomainForTopologyAndCPUSet), so that setting carries it"),
    Stack(
        "OpenNebula",
        "<one:vm> in <metadata>, namespace http://opennebula.org/xmlns/libvirt/1.0 (written since 5.8)",
        (("http://opennebula.org/xmlns/libvirt/1.0", "vm"),), (),
        "names one-<VM id>; a deployment file older than 5.8 has only that name, and its domain is transient "
        "anyway (virsh create), which the hook tells without recognising the stack",
        False,
        "every deploy runs `virsh create` of a deployment file generated from the VM template: the domain is "
        "transient, there is no persistent definition to change",
        "in the VM template (or the host's or cluster's defaults): RAW = [ TYPE = \"kvm\", DATA = "
        "\"<features><pvspinlock state='on'/></features>\" ] (appended to the deployment file as it is); or "
        "CPU_MODEL = [ MODEL = \"host-passthrough\" ]",
        "RAW: 1.8 or earlier; CPU_MODEL host-passthrough: 5.6",
        "no FEATURES key for it; CPU_MODEL unset (QEMU's default model): off",
        "RAW: none; CPU_MODEL host-passthrough: " + HOST_PASSTHROUGH_COST,
        "OpenNebula/one f847cf2e9a: src/vmm/LibVirtDriverKVM.cc (<name>one-<oid>, <one:vm> metadata since "
        "a67217f2c2 = release 5.8, RAW DATA appended as it is since 5446e5737e = release 1.8 or earlier, "
        "CPU_MODEL host-passthrough since c911ffdc8c = release 5.6), src/vmm_mad/remotes/kvm/deploy "
        "(virsh create $DEP_FILE)",
        "",
        ""),
    Stack(
        "Apache CloudStack",
        "<sysinfo><system>: manufacturer 'Apache Software Foundation' or product 'CloudStack KVM Hypervisor' "
        "(both can be changed per zone in newer releases)",
        (), (("manufacturer", "Apache Software Foundation"), ("product", "CloudStack KVM Hypervisor")),
        "names i-<account>-<vm>-VM for user VMs and r-/s-/v-<id>-VM for system VMs: anyone may name a guest so; "
        "the domain is transient anyway, which the hook tells without recognising the stack",
        False,
        "the KVM agent builds the definition (LibvirtVMDef) and creates the domain from it at every start: the "
        "domain is transient, there is no persistent definition to change",
        "agent.properties on each KVM host: guest.cpu.mode=host-passthrough; or a VM's extraconfig with "
        "<features><pvspinlock state='on'/></features> (needs enable.additional.vm.configuration=true and the "
        "tag allowed in allow.additional.vm.configuration.list.kvm). guest.cpu.features writes <cpu><feature>, "
        "where libvirt has no kvm_pv_unhalt",
        None,
        "guest.cpu.mode unset (QEMU's default model): off",
        HOST_PASSTHROUGH_COST + " (extraconfig: none)",
        "apache/cloudstack 01b679ee9b: plugins/hypervisors/kvm/src/main/java/com/cloud/hypervisor/kvm/resource/"
        "LibvirtVMDef.java (GuestDef.toString: <sysinfo> manufacturer and product); newer: "
        "VmExternalProvisioningManagerImpl.updateVmMetadataManufacturerAndProduct (zone-scoped manufacturer and "
        "product, 'CloudStack <hypervisor> Hypervisor' by default)",
        "the agent's createXML call, the agent.properties keys and extraconfig (from the project's notes: the "
        "repository was too large to fetch here); knob_since",
        ""),
    Stack(
        "TrueNAS SCALE",
        "not recognisable: it writes no metadata or sysinfo of its own",
        (), (),
        "the domain's <name> is its uuid (truenas_pylibvirt) or <id>_<name> (older middleware): neither is "
        "distinctive",
        False,
        "the middleware defines the domain again from its database before every start (define, then create), "
        "so a change made in libvirt does not last",
        "the VM's CPU Mode: Host Passthrough (API cpu_mode: HOST-PASSTHROUGH); or command_line_args, which "
        "goes into <qemu:commandline> (e.g. -global x86_64-cpu.kvm-pv-unhalt=on; libvirt marks the domain "
        "tainted)",
        None,
        "cpu_mode CUSTOM: off",
        HOST_PASSTHROUGH_COST,
        "truenas/truenas_pylibvirt b386508769: truenas_pylibvirt/domain/manager.py (start: define_domain, "
        "create), domain/base/xml.py (<name> = uuid), domain/vm/xml.py (HOST_PASSTHROUGH, qemu:commandline); "
        "truenas/middleware 24c9f62300: plugins/vm/supervisor/supervisor.py (undefine, define; name id_name)",
        "knob_since",
        ""),
    Stack(
        "virt-install/virt-manager",
        "not recognisable: the libosinfo metadata it writes is written by other tools too",
        (), (),
        "",
        True,
        "it writes the definition once; later edits are made in libvirt and last",
        "virt-xml NAME --edit --features pvspinlock.state=on (virt-install --features pvspinlock.state=on at "
        "creation)",
        "1.3.0",
        "off unless the CPU is host-passthrough",
        None,
        "virt-manager/virt-manager 2450354f: virtinst/domain/features.py (pvspinlock)",
        "knob_since and the option's file: from the project's notes, not read again here",
        ""),
    Stack(
        "Vagrant-libvirt",
        "not recognisable: its description 'Source: <Vagrantfile>' is free text",
        (), (),
        "",
        True,
        "it defines the domain at `vagrant up` (create); later starts re-sync vCPUs, CPU mode, disks and NICs "
        "but not <features>, so a change made in libvirt lasts",
        "libvirt.features = ['acpi', 'apic', \"pvspinlock state='on'\"] in the Vagrantfile (applied at create)",
        "0.12.2",
        "off",
        None,
        "vagrant-libvirt/vagrant-libvirt: lib/vagrant-libvirt/templates/domain.xml.erb",
        "the features option and knob_since: the stored template versions (255146ec41) predate it; from the "
        "project's notes",
        ""),
    Stack(
        "GNOME Boxes",
        "<gnome-boxes> in <metadata>, namespace https://wiki.gnome.org/Apps/Boxes (older: "
        "http://live.gnome.org/Boxes/); its guests are on qemu:///session",
        (("https://wiki.gnome.org/Apps/Boxes", "gnome-boxes"), ("http://live.gnome.org/Boxes/", "gnome-boxes")), (),
        "",
        True,
        "it adjusts the CPU mode and devices of its guests, not <features>, so a change made in libvirt lasts",
        "its XML editor (Preferences > Edit configuration), or virt-xml --connect qemu:///session NAME --edit "
        "--features pvspinlock.state=on",
        None,
        "host-passthrough on KVM: on",
        None,
        "GNOME/gnome-boxes: src/vm-configurator.vala (BOXES_NS_URI, BOXES_OLD_NS_URI)",
        "the commit; which elements it rewrites on an existing guest; the default",
        ""),
    Stack(
        "Unraid",
        "<vmtemplate> in <metadata>, namespace http://unraid (older: unraid)",
        (("http://unraid", "vmtemplate"), ("unraid", "vmtemplate")), (),
        "",
        True,
        "its form saves merge into the existing XML, so a change made in libvirt lasts",
        "the VM's XML view: <features><pvspinlock state='on'/></features>",
        None,
        "off",
        None,
        "unraid/webgui: emhttp/plugins/dynamix.vm.manager (vmtemplate namespace)",
        "whether a form save keeps <pvspinlock>; the commit",
        ""),
    Stack(
        "Terraform libvirt",
        "not recognisable: it writes no metadata of its own",
        (), (),
        "",
        False,
        "0.9.x undefines and defines the domain again on every update of the resource",
        "0.9: features = { pv_spinlock = { state = \"on\" } } in the libvirt_domain resource; 0.8: "
        "xml { xslt = ... }",
        "0.9.0",
        "off",
        None,
        "dmacvicar/terraform-provider-libvirt: internal/provider/domain_resource.go, internal/codegen (features "
        "generated from libvirt's XML schema)",
        "the attribute's exact name, knob_since and what 0.9 does on update: from the project's notes",
        ""),
)

BY_NAME: dict[str, Stack] = {s.name: s for s in STACKS}
RECOGNISED: tuple[Stack, ...] = tuple(s for s in STACKS if s.recognisable)

# The names the rules have always read (core/decision.py): kept so that old readers keep working.
ORCHESTRATORS = RECOGNISED
NOTES: dict[str, str] = {s.name: s.edits_why for s in RECOGNISED}
DEDICATED_NOTES: dict[str, str] = {s.name: s.dedicated for s in RECOGNISED if s.dedicated}

# KubeVirt's VirtualMachine patch that sets the knob (merge patch; `kubectl patch vm NAME -n NAMESPACE`).
KUBEVIRT_PATCH = '{"spec":{"template":{"spec":{"domain":{"features":{"pvspinlock":{}}}}}}}'


def record(name: str | None) -> dict | None:
    """The stack as the records give it (render/, the Cockpit page): None for a definition no stack claims."""
    s = BY_NAME.get(name) if name else None
    if s is None:
        return None
    return {"name": s.name, "edits_last": s.edits_last, "knob": s.knob, "knob_since": s.knob_since,
            "default": s.default, "cost": s.cost, "source": s.source}


def managed(name: str | None) -> bool:
    """Whether the stack named writes the definition again (a change made in libvirt does not last)."""
    s = BY_NAME.get(name) if name else None
    return s is not None and s.managed

"""The order in which libvirt's formatter writes sibling elements, so that an inserted element lands where
`virsh dumpxml` would put it. Data only; xml/insert.py places elements by it, and the lab tests check it
against what libvirt 9.0 and 11.3 write back.
"""

from __future__ import annotations

# <features> children: the VIR_DOMAIN_FEATURE_* enum (src/conf/domain_conf.h), which
# virDomainDefFormatFeatures walks in order. Newer libvirt releases append to the end.
FEATURES = (
    "acpi", "apic", "pae", "hap", "viridian", "privnet", "hyperv", "kvm", "pvspinlock", "capabilities", "pmu",
    "vmport", "gic", "smm", "ioapic", "hpt", "vmcoreinfo", "htm", "nested-hv", "msrs", "ccf-assist", "xen",
    "cfpc", "sbbc", "ibs", "tcg", "async-teardown", "ras", "ps2", "aia",
)

# <cpu> children: virCPUDefFormatBuf (model, vendor, topology, cache, maxphysaddr, features), then the
# guest NUMA topology that virCPUDefFormatBufFull appends.
CPU = ("model", "vendor", "topology", "cache", "maxphysaddr", "feature", "numa")

# <domain> children around the two we may create (virDomainDefFormatInternal).
DOMAIN = (
    "name", "uuid", "genid", "title", "description", "metadata", "maxMemory", "memory", "currentMemory",
    "blkiotune", "memtune", "memoryBacking", "vcpu", "vcpus", "iothreads", "iothreadids", "defaultiothread",
    "cputune", "numatune", "resource", "throttlegroups", "sysinfo", "bootloader", "bootloader_args", "os",
    "idmap", "features", "cpu", "clock", "on_poweroff", "on_reboot", "on_crash", "on_lockfailure", "pm",
    "perf", "devices", "seclabel", "keywrap", "launchSecurity",
)

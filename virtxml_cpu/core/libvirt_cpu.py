"""What libvirt puts on QEMU's -cpu for a domain, what it refuses to start, and who chose kvm-pv-unhalt (pure).

libvirt's translation is rows of tables/libvirt_xml.py; this module interprets them.
"""

from __future__ import annotations

from .cpu_option import names_unhalt
from .domain import DomainFacts
from .answer import ON, OFF, Value
from ..tables import libvirt_xml

qemu_name = libvirt_xml.qemu_name


def libvirt_cpu_props(facts: DomainFacts, warnings: list[str]) -> list[tuple[str, bool, str, str]]:
    """The -cpu properties libvirt generates, in its order: <cpu><feature> first (qemuBuildCpuFeatureArg),
    then each libvirt_xml row the domain writes."""
    out: list[tuple[str, bool, str, str]] = []
    for name, policy in facts.cpu_features:
        q = qemu_name(name)
        if q in libvirt_xml.NOT_IN_CPU_MAP:
            warnings.append(f"<cpu><feature name='{name}'/>: {libvirt_xml.NOT_IN_CPU_MAP_NOTE}")
        value = libvirt_xml.cpu_feature_value(policy)
        if value:
            out.append((q, value == ON, libvirt_xml.CPU_FEATURE_SOURCE, f"<feature policy='{policy}' name='{name}'/>"))
    for key, value in facts.settings:
        row = libvirt_xml.BY_KEY[key]
        if row.option == "-cpu" and value in row.values:
            q = row.values[value]
            out.append((row.prop, q == ON, row.source, row.detail.format(v=value, q=q)))
    return out



def start_refusal(facts: DomainFacts, kind: str, values: dict[str, Value], warnings: list[str]) -> str | None:
    """libvirt's own checks that stop the start (libvirt_xml: virCPUx86ValidateFeatures, qemu_validate.c,
    qemuProcessVerifyKVMFeatures)."""
    for name, _policy in facts.cpu_features:
        if qemu_name(name) in libvirt_xml.NOT_IN_CPU_MAP:
            return libvirt_xml.NOT_IN_CPU_MAP_ERROR.format(name=name)
    for key, value in facts.settings:
        refusal = libvirt_xml.BY_KEY[key].refused_with_named.get(value)
        if refusal and kind == "named" and not facts.qemu.cpu:
            return refusal
    # qemuProcessVerifyKVMFeatures reads the started vCPU, also when a <qemu:commandline> -cpu replaced libvirt's.
    for key, value in facts.settings:
        row = libvirt_xml.BY_KEY[key]
        if row.verified and row.values.get(value) == ON and values[row.prop].qemu_property == OFF:
            warnings.append(f"libvirt will refuse to start this domain ('{row.verified}'): "
                                f"{row.detail.format(v=value, q=ON).split(' -> ')[0]} but {row.prop} ends up off "
                                f"({values[row.prop].source})")
            return row.verified
    return None



def explicit_unhalt(facts: DomainFacts) -> str | None:
    """Who chose kvm-pv-unhalt explicitly, in any form libvirt or QEMU accepts; such a choice is never changed."""
    for key, value in facts.settings:
        row = libvirt_xml.BY_KEY[key]
        if row.prop == "kvm-pv-unhalt":
            return f"{row.source[:-1]} {row.attr}='{value}'/>"
    for name, policy in facts.cpu_features:
        if qemu_name(name) == "kvm-pv-unhalt":
            return f"<cpu><feature policy='{policy}' name='{name}'/>"
    if facts.qemu.cpu and names_unhalt(facts.qemu.cpu):
        return f"<qemu:commandline> -cpu {facts.qemu.cpu}"
    for driver, prop, value in facts.qemu.globals:
        if qemu_name(prop) == "kvm-pv-unhalt":
            return f"<qemu:commandline> -global {driver}.{prop}={value}"
    return None

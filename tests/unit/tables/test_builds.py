"""Held-out check against the downstream packaging: every machine name each Ubuntu distro (xenial ... noble)
and each RHEL qemu-kvm (el8, el9, el10) defines, with the answer its own sources give, read from
define-ubuntu-machine-types.patch / enable-svm-by-default.patch per release and RHEL's machine-type patches
and compat arrays (pc_rhel_*), not from this tool's tables.

The domain: KVM, `-cpu qemu64` (x2apic clear, svm set in the model), split irqchip (<ioapic driver='qemu'/>),
2 vCPUs, on an AMD host whose KVM offers svm and every paravirt bit; the distro and its QEMU release known.
Columns: kvm-pv-unhalt, l3-cache, kvm-msi-ext-dest-id, svm, x2apic, kvm-asyncpf-vmexit (named models: always off),
and the decision's rule under policy compat.
- Ubuntu: upstream's arrays at the options each name calls; no svm patch before Ubuntu's QEMU 2.6 (xenial);
  l3-cache exists from QEMU 2.8, kvm-msi-ext-dest-id from 6.0; machines older than 2.11 are left alone.
- RHEL: RHEL's arrays only (no RHEL array turns kvm-msi-ext-dest-id off; l3-cache off <= rhel7.3.0; svm the
  model's bit on pc-i440fx-rhel7.1.0/7.0.0, x2apic on rhel7.0.0), kvm-pv-unhalt on for every machine; RHEL
  8's upstream pc-i440fx-2.11/4.2 take upstream's arrays (pc_compat_5_1: kvm-msi-ext-dest-id off).
"""

from __future__ import annotations

import pytest
from lxml import etree

from virtxml_cpu.core import domain, resolve, decision
from virtxml_cpu.core.hostfacts import HostFacts
from virtxml_cpu.tables.version import parse_version

KEY = ("kvm-pv-unhalt", "l3-cache", "kvm-msi-ext-dest-id", "svm", "x2apic", "kvm-asyncpf-vmexit")

CASES = [
    ("ubuntu", "xenial", "2.5.0", "pc-i440fx-trusty", "off off off on on off", "machine-too-old"),
    ("ubuntu", "xenial", "2.5.0", "pc-i440fx-utopic", "off off off on on off", "machine-too-old"),
    ("ubuntu", "xenial", "2.5.0", "pc-i440fx-vivid", "off off off off on off", "machine-too-old"),
    ("ubuntu", "xenial", "2.5.0", "pc-i440fx-wily", "off off off off on off", "machine-too-old"),
    ("ubuntu", "xenial", "2.5.0", "pc-i440fx-xenial", "off off off off on off", "machine-too-old"),
    ("ubuntu", "xenial", "2.5.0", "pc-q35-xenial", "off off off off on off", "machine-too-old"),
    ("ubuntu", "bionic", "2.11.1", "pc-i440fx-artful", "off on off on on off", "machine-too-old"),
    ("ubuntu", "bionic", "2.11.1", "pc-i440fx-bionic", "off on off on on off", "policy-compat"),
    ("ubuntu", "bionic", "2.11.1", "pc-i440fx-bionic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "bionic", "2.11.1", "pc-i440fx-trusty", "off off off on on off", "machine-too-old"),
    ("ubuntu", "bionic", "2.11.1", "pc-i440fx-wily", "off off off on on off", "machine-too-old"),
    ("ubuntu", "bionic", "2.11.1", "pc-i440fx-xenial", "off off off on on off", "machine-too-old"),
    ("ubuntu", "bionic", "2.11.1", "pc-i440fx-yakkety", "off off off on on off", "machine-too-old"),
    ("ubuntu", "bionic", "2.11.1", "pc-i440fx-zesty", "off on off on on off", "machine-too-old"),
    ("ubuntu", "bionic", "2.11.1", "pc-q35-artful", "off on off on on off", "machine-too-old"),
    ("ubuntu", "bionic", "2.11.1", "pc-q35-bionic", "off on off on on off", "policy-compat"),
    ("ubuntu", "bionic", "2.11.1", "pc-q35-bionic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "bionic", "2.11.1", "pc-q35-xenial", "off off off on on off", "machine-too-old"),
    ("ubuntu", "bionic", "2.11.1", "pc-q35-yakkety", "off off off on on off", "machine-too-old"),
    ("ubuntu", "bionic", "2.11.1", "pc-q35-zesty", "off on off on on off", "machine-too-old"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-artful", "off on off on on off", "machine-too-old"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-bionic", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-bionic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-cosmic", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-cosmic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-disco", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-disco-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-eoan", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-eoan-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-focal", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-focal-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-trusty", "off off off on on off", "machine-too-old"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-wily", "off off off on on off", "machine-too-old"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-xenial", "off off off on on off", "machine-too-old"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-yakkety", "off off off on on off", "machine-too-old"),
    ("ubuntu", "focal", "4.2.1", "pc-i440fx-zesty", "off on off on on off", "machine-too-old"),
    ("ubuntu", "focal", "4.2.1", "pc-q35-artful", "off on off on on off", "machine-too-old"),
    ("ubuntu", "focal", "4.2.1", "pc-q35-bionic", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-q35-bionic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-q35-cosmic", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-q35-cosmic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-q35-disco", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-q35-disco-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-q35-eoan", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-q35-eoan-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-q35-focal", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-q35-focal-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "focal", "4.2.1", "pc-q35-xenial", "off off off on on off", "machine-too-old"),
    ("ubuntu", "focal", "4.2.1", "pc-q35-yakkety", "off off off on on off", "machine-too-old"),
    ("ubuntu", "focal", "4.2.1", "pc-q35-zesty", "off on off on on off", "machine-too-old"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-artful", "off on off on on off", "machine-too-old"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-bionic", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-bionic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-cosmic", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-cosmic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-disco", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-disco-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-eoan", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-eoan-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-focal", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-focal-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-groovy", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-groovy-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-hirsute", "off on on on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-hirsute-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-impish", "off on on on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-impish-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-jammy", "off on on on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-jammy-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-trusty", "off off off on on off", "machine-too-old"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-wily", "off off off on on off", "machine-too-old"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-xenial", "off off off on on off", "machine-too-old"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-yakkety", "off off off on on off", "machine-too-old"),
    ("ubuntu", "jammy", "6.2.0", "pc-i440fx-zesty", "off on off on on off", "machine-too-old"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-artful", "off on off on on off", "machine-too-old"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-bionic", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-bionic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-cosmic", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-cosmic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-disco", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-disco-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-eoan", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-eoan-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-focal", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-focal-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-groovy", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-groovy-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-hirsute", "off on on on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-hirsute-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-impish", "off on on on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-impish-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-jammy", "off on on on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-jammy-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-xenial", "off off off on on off", "machine-too-old"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-yakkety", "off off off on on off", "machine-too-old"),
    ("ubuntu", "jammy", "6.2.0", "pc-q35-zesty", "off on off on on off", "machine-too-old"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-artful", "off on off on on off", "machine-too-old"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-bionic", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-bionic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-cosmic", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-cosmic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-disco", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-disco-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-eoan", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-eoan-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-focal", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-focal-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-groovy", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-groovy-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-hirsute", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-hirsute-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-impish", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-impish-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-jammy", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-jammy-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-jammy-hpb-maxcpus", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-jammy-maxcpus", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-kinetic", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-kinetic-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-lunar", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-lunar-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-mantic", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-mantic-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-mantic-hpb-maxcpus", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-mantic-maxcpus", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-noble", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-trusty", "off off off on on off", "machine-too-old"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-wily", "off off off on on off", "machine-too-old"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-xenial", "off off off on on off", "machine-too-old"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-yakkety", "off off off on on off", "machine-too-old"),
    ("ubuntu", "noble", "8.2.2", "pc-i440fx-zesty", "off on off on on off", "machine-too-old"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-artful", "off on off on on off", "machine-too-old"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-bionic", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-bionic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-cosmic", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-cosmic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-disco", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-disco-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-eoan", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-eoan-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-focal", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-focal-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-groovy", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-groovy-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-hirsute", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-hirsute-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-impish", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-impish-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-jammy", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-jammy-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-jammy-hpb-maxcpus", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-jammy-maxcpus", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-kinetic", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-kinetic-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-lunar", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-lunar-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-mantic", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-mantic-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-mantic-hpb-maxcpus", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-mantic-maxcpus", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-noble", "off on on on on off", "policy-compat"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-xenial", "off off off on on off", "machine-too-old"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-yakkety", "off off off on on off", "machine-too-old"),
    ("ubuntu", "noble", "8.2.2", "pc-q35-zesty", "off on off on on off", "machine-too-old"),
    ("rhel", "el8", "6.2.0", "pc-i440fx-rhel7.0.0", "on off on on off off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-i440fx-rhel7.1.0", "on off on on on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-i440fx-rhel7.2.0", "on off on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-i440fx-rhel7.3.0", "on off on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-i440fx-rhel7.4.0", "on on on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-i440fx-rhel7.5.0", "on on on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-i440fx-rhel7.6.0", "on on on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-q35-rhel7.3.0", "on off on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-q35-rhel7.4.0", "on on on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-q35-rhel7.5.0", "on on on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-q35-rhel7.6.0", "on on on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-q35-rhel8.0.0", "on on on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-q35-rhel8.1.0", "on on on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-q35-rhel8.2.0", "on on on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-q35-rhel8.3.0", "on on on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-q35-rhel8.4.0", "on on on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-q35-rhel8.5.0", "on on on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-q35-rhel8.6.0", "on on on off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-i440fx-2.11", "on on off off on off", "already-on"),
    ("rhel", "el8", "6.2.0", "pc-i440fx-4.2", "on on off off on off", "already-on"),
    ("rhel", "el9", "9.1.0", "pc-i440fx-rhel7.6.0", "on on on off on off", "already-on"),
    ("rhel", "el9", "9.1.0", "pc-q35-rhel7.6.0", "on on on off on off", "already-on"),
    ("rhel", "el9", "9.1.0", "pc-q35-rhel8.0.0", "on on on off on off", "already-on"),
    ("rhel", "el9", "9.1.0", "pc-q35-rhel8.1.0", "on on on off on off", "already-on"),
    ("rhel", "el9", "9.1.0", "pc-q35-rhel8.2.0", "on on on off on off", "already-on"),
    ("rhel", "el9", "9.1.0", "pc-q35-rhel8.3.0", "on on on off on off", "already-on"),
    ("rhel", "el9", "9.1.0", "pc-q35-rhel8.4.0", "on on on off on off", "already-on"),
    ("rhel", "el9", "9.1.0", "pc-q35-rhel8.5.0", "on on on off on off", "already-on"),
    ("rhel", "el9", "9.1.0", "pc-q35-rhel8.6.0", "on on on off on off", "already-on"),
    ("rhel", "el9", "9.1.0", "pc-q35-rhel9.0.0", "on on on off on off", "already-on"),
    ("rhel", "el9", "9.1.0", "pc-q35-rhel9.2.0", "on on on off on off", "already-on"),
    ("rhel", "el9", "9.1.0", "pc-q35-rhel9.4.0", "on on on off on off", "already-on"),
    ("rhel", "el9", "9.1.0", "pc-q35-rhel9.6.0", "on on on off on off", "already-on"),
    ("rhel", "el10", "10.0.0", "pc-q35-rhel9.0.0", "on on on off on off", "already-on"),
    ("rhel", "el10", "10.0.0", "pc-q35-rhel9.2.0", "on on on off on off", "already-on"),
    ("rhel", "el10", "10.0.0", "pc-q35-rhel9.4.0", "on on on off on off", "already-on"),
    ("rhel", "el10", "10.0.0", "pc-q35-rhel9.6.0", "on on on off on off", "already-on"),
    ("rhel", "el10", "10.0.0", "pc-q35-rhel10.0.0", "on on on off on off", "already-on"),
    ("rhel", "el10", "10.0.0", "pc-i440fx-rhel10.0.0", "on on on off on off", "already-on"),
    # Ubuntu 26.04 (QEMU 10.2), its define-ubuntu-machine-types.patch read in full: codename machines have no
    # age rule; xenial's 2.5 options are gone (upstream removed them in 10.1), so the QEMU will not start it.
    ("ubuntu", "resolute", "10.2.1", "pc-i440fx-xenial", "off off off on on off", "machine-not-offered"),
    ("ubuntu", "resolute", "10.2.1", "pc-q35-yakkety", "off off off on on off", "machine-too-old"),
    ("ubuntu", "resolute", "10.2.1", "pc-i440fx-zesty", "off on off on on off", "machine-too-old"),
    ("ubuntu", "resolute", "10.2.1", "pc-q35-bionic-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "resolute", "10.2.1", "pc-q35-cosmic", "off on off on on off", "policy-compat"),
    ("ubuntu", "resolute", "10.2.1", "pc-i440fx-groovy", "off on off on on off", "policy-compat"),
    ("ubuntu", "resolute", "10.2.1", "pc-i440fx-hirsute-hpb", "off on off on on off", "policy-compat"),
    ("ubuntu", "resolute", "10.2.1", "pc-q35-hirsute-hpb", "off on on on on off", "policy-compat"),
    ("ubuntu", "resolute", "10.2.1", "pc-q35-jammy-hpb-maxcpus", "off on on on on off", "policy-compat"),
    ("ubuntu", "resolute", "10.2.1", "pc-q35-noble-v2", "off on on on on off", "policy-compat"),
    ("ubuntu", "resolute", "10.2.1", "pc-i440fx-oracular", "off on on on on off", "policy-compat"),
    ("ubuntu", "resolute", "10.2.1", "pc-q35-plucky", "off on on on on off", "policy-compat"),
    ("ubuntu", "resolute", "10.2.1", "pc-i440fx-questing", "off on on on on off", "policy-compat"),
    ("ubuntu", "resolute", "10.2.1", "pc-i440fx-questing-v2", "off on on on on off", "policy-compat"),
    ("ubuntu", "resolute", "10.2.1", "pc-q35-resolute", "off on on on on off", "policy-compat"),
    ("ubuntu", "resolute", "10.2.1", "pc-q35-7.2", "off on on on on off", "policy-compat"),
    ("ubuntu", "resolute", "10.2.1", "pc-q35-4.1", "off on off on on off", "machine-not-offered"),
    # RHEL 9.8 and 10.2 (qemu-kvm 10.1): the new rhel9.8.0 / rhel10.2.0 machines are 10.1's options.
    ("rhel", "el9.8", "10.1.0", "pc-q35-rhel9.8.0", "on on on off on off", "already-on"),
    ("rhel", "el9.8", "10.1.0", "pc-q35-rhel9.6.0", "on on on off on off", "already-on"),
    ("rhel", "el9.8", "10.1.0", "pc-i440fx-rhel7.6.0", "on on on off on off", "already-on"),
    ("rhel", "el10.2", "10.1.0", "pc-q35-rhel10.2.0", "on on on off on off", "already-on"),
    ("rhel", "el10.2", "10.1.0", "pc-q35-rhel9.8.0", "on on on off on off", "already-on"),
    ("rhel", "el10.2", "10.1.0", "pc-q35-rhel10.0.0", "on on on off on off", "already-on"),
]


def _domain(machine: str):
    return domain.extract(etree.fromstring(
        f"<domain type='kvm'><name>t</name><vcpu>2</vcpu><os><type arch='x86_64' machine='{machine}'>hvm</type>"
        "</os><features><ioapic driver='qemu'/></features><cpu mode='custom'><model>qemu64</model></cpu>"
        "<devices/></domain>"))


def test_the_table_covers_every_build():
    distros = {(c[0], c[1]) for c in CASES}
    assert {b for _, b in distros} == {"xenial", "bionic", "focal", "jammy", "noble", "resolute", "el8", "el9", "el10",
                                      "el9.8", "el10.2"}
    assert len({(c[1], c[3]) for c in CASES}) == len(CASES) >= 139


@pytest.mark.parametrize("build,distro,release,machine,states,rule", CASES,
                         ids=[f"{c[1]}-{c[3]}" for c in CASES])
def test_downstream_machine(build, distro, release, machine, states, rule, host):
    cpuid = dict(host.cpuid)
    cpuid[(0x80000001, "ecx")] = cpuid.get((0x80000001, "ecx"), 0) | 1 << 2  # nested SVM
    cpuid[(0x40000001, "eax")] = 0xFFFF | 1 << 24
    facts = HostFacts(cpuid=cpuid, qemu_build=build, build_source=distro,
                      qemu_version=parse_version(release), version_source=distro)
    res = resolve.resolve(_domain(machine), facts)
    got = " ".join(res.features[p].state for p in KEY)
    decided = decision.decide(res, "compat")
    assert (got, decided.rule) == (states, rule), "\n".join(
        f"{p}: {res.features[p].state} ({res.features[p].source}: {res.features[p].detail})" for p in KEY) + \
        f"\n{decided.reason}\n{res.machine.how}"


UPSTREAM_RELEASES = ["5.2.0", "6.0.0", "6.2.0", "7.2.22", "8.2.0", "9.2.0", "10.0.2", "11.1.3"]


@pytest.mark.parametrize("release", UPSTREAM_RELEASES)
def test_upstream_release_gates_kvm_msi_ext_dest_id(release, host):
    """QEMU 5.2 has no kvm-msi-ext-dest-id (c1bb5418e3 came in 6.0): off with a split irqchip on every machine,
    where 6.0 and later say on, except for machines <= 5.1 (pc_compat_5_1)."""
    v = parse_version(release)
    for machine in ("pc-q35-5.1", "pc-q35-5.2", "pc-i440fx-5.2", f"pc-q35-{v[0]}.{v[1]}"):
        facts = host._replace(qemu_build="upstream", qemu_version=v, version_source="test")
        value = resolve.resolve(_domain(machine), facts).features["kvm-msi-ext-dest-id"]
        want = "on" if v >= (6, 0) and parse_version(machine.rsplit("-", 1)[1]) > (5, 1) else "off"
        assert value.state == want, (machine, value)
        if v < (6, 0):
            assert value.source == "qemu-release" and "c1bb5418e3" in value.detail


def _with_model(machine: str, model: str):
    return domain.extract(etree.fromstring(
        f"<domain type='kvm'><name>t</name><vcpu>2</vcpu><os><type arch='x86_64' machine='{machine}'>hvm</type>"
        f"</os><cpu mode='custom'><model>{model}</model></cpu><devices/></domain>"))


@pytest.mark.parametrize("machine,model,prop,state", [
    ("rhel6.6.0", "qemu64", "kvm-pv-unhalt", "off"),  # pc_compat_rhel660: the model's bit
    ("rhel6.6.0", "qemu64", "kvm-pv-eoi", "on"),
    ("rhel6.3.0", "qemu64", "kvm-pv-eoi", "off"),  # pc_compat_rhel630
    ("pc-i440fx-rhel7.0.0", "qemu64", "kvm-pv-unhalt", "on"),
    ("pc-i440fx-rhel7.0.0", "qemu64", "x2apic", "off"),  # pc_compat_rhel700: the model's bit
    ("pc-i440fx-rhel7.0.0", "Westmere", "x2apic", "on"),  # pc_rhel_7_0_compat, per model
    ("rhel6.6.0", "Opteron_G4", "x2apic", "off"),  # PC_RHEL6_6_COMPAT after pc_rhel_7_0_compat
    ("rhel6.6.0", "Opteron_G3", "x2apic", "on"),
    ("pc-i440fx-rhel7.0.0", "qemu64", "kvm-msi-ext-dest-id", "off"),  # QEMU 2.12 has none
])
def test_rhel7_builds_and_their_rhel6_machines(machine, model, prop, state, host):
    """qemu-kvm-ev 2.12.0 (RHEL 7.6 ... 7.9): the rows only RHEL 7 distros reach."""
    facts = host._replace(qemu_build="rhel", build_source="el7", qemu_version=(2, 12, 0), version_source="el7")
    value = resolve.resolve(_with_model(machine, model), facts).features[prop]
    assert value.state == state, value


def test_rhel_q35_alias_is_a_rhel_machine(host):
    """`q35` on RHEL is the newest pc-q35-rhelX.Y.Z: RHEL's arrays, so no pc_compat_5_1 row."""
    facts = host._replace(qemu_build="rhel", build_source="el9", qemu_version=(9, 1, 0), version_source="el9",
                          aliases={})
    res = resolve.resolve(_domain("q35"), facts)
    assert res.features["kvm-msi-ext-dest-id"].state == "on" and res.features["kvm-pv-unhalt"].state == "on"

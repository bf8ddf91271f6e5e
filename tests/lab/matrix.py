"""Guests against QEMU's own answer: define a guest through a lab's libvirt, start it paused, read every
property the tool models from vCPU 0 (qom-get) and compare with what the tool says for that definition
and that host. Used by the lab matrices (tests/lab/test_qemu.py, tests/lab/test_ends.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.lab import harness
from virtxml_cpu.core import resolve
from virtxml_cpu.tables import qemu
from virtxml_cpu.core.domain import extract
from virtxml_cpu.xml.parse import parse_domain

QNS = "xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'"
CPU_MODES = {
    "none": "",
    "custom": "<cpu mode='custom' match='exact'><model fallback='forbid'>qemu64</model></cpu>",
    "custom-named": "<cpu mode='custom' match='exact'><model fallback='forbid'>EPYC</model></cpu>",
    "host-model": "<cpu mode='host-model'/>",
    "host-passthrough": "<cpu mode='host-passthrough'/>",
    "maximum": "<cpu mode='maximum'/>",
}


def domain_xml(name, machine, cpu, features="", vtype="kvm", extra="", devices="", vcpus=2, newest=None) -> bytes:
    machine = (newest or {}).get(machine, machine)
    mattr = f" machine='{machine}'" if machine else ""
    feats = f"<features>{features}</features>" if features else ""
    return (f"<domain type='{vtype}' {QNS}><name>{name}</name><memory unit='MiB'>64</memory><vcpu>{vcpus}</vcpu>"
            f"<os><type arch='x86_64'{mattr}>hvm</type></os>{feats}{cpu}"
            f"<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>{devices}</devices>{extra}</domain>").encode()


def compare(conn, host, label, xml):
    """(label, what QEMU has, disagreements) for one guest; a refused start must be the predicted refusal."""
    import libvirt

    started = harness.startable(xml)
    res = resolve.resolve(extract(parse_domain(started).getroot()), host)
    want = {p: res.features[p].qemu_property for p in qemu.PROPERTIES}
    try:
        got = harness.read_properties(conn, started, qemu.PROPERTIES)
    except libvirt.libvirtError as e:
        msg = e.get_error_message()
        refusal = res.start_refusal or res.qemu_refusal  # libvirt's own check, or QEMU's error it passes on
        ok = refusal is not None and refusal in msg
        return label, {"start": "refused"}, ({} if ok else {"start": (refusal, msg, "")})
    if res.start_refusal or res.qemu_refusal:
        return label, got, {"start": (res.start_refusal or res.qemu_refusal, "started", "")}
    got = {p: "on" if v else "off" for p, v in got.items()}
    diffs = {p: (want[p], got[p], res.features[p].detail) for p in qemu.PROPERTIES if want[p] != got[p]}
    return label, got, diffs


def run_all(conn, host, cases):
    """compare() for each (label, xml), three guests at a time."""
    with ThreadPoolExecutor(max_workers=3) as pool:
        return list(pool.map(lambda c: compare(conn, host, c[0], c[1]), cases))


def pc_machines(host) -> list[str]:
    return sorted(m for m in host.machines if m.startswith(("pc-i440fx-", "pc-q35-")))

"""QEMU builds: every machine type name upstream, Ubuntu and RHEL QEMUs offer is classified; each build's
deltas (Ubuntu's svm, RHEL's kvm-pv-unhalt) show; the build is detected and explained."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from lxml import etree

from virtxml_cpu.core import domain, resolve, decision
from virtxml_cpu.tables.builds.known import BUILDS, RHEL, UBUNTU, UPSTREAM
from virtxml_cpu.core.hostfacts import HostFacts, build_from_machines, build_from_version
from virtxml_cpu.core.machines import claimants, classify

from tests.support import FIXTURES, ROOT
from tests.support.qemu import caps_cache

UBUNTU_CODENAMES = ["xenial", "yakkety", "zesty", "artful", "bionic", "cosmic", "disco", "eoan", "focal", "groovy",
                    "hirsute", "impish", "jammy", "kinetic", "lunar", "mantic", "noble", "oracular", "plucky",
                    "questing", "resolute"]
UBUNTU_NAMES = (["pc-i440fx-trusty", "pc-i440fx-wily", "ubuntu", "ubuntu-q35", "pc-q35-jammy-maxcpus",
                 "pc-i440fx-jammy-maxcpus", "pc-q35-mantic-hpb-maxcpus", "pc-q35-noble-v2", "pc-i440fx-noble-v2",
                 "pc-i440fx-questing-v2", "pc-q35-cosmic-hpb", "pc-i440fx-hirsute-hpb"]
                + [f"pc-{f}-{c}" for f in ("i440fx", "q35") for c in UBUNTU_CODENAMES]
                + [f"pc-{f}-{c}-hpb" for f in ("i440fx", "q35") for c in UBUNTU_CODENAMES[4:15]])
RHEL_NAMES = ([f"pc-i440fx-rhel7.{m}.0" for m in range(7)] + [f"pc-q35-rhel7.{m}.0" for m in range(3, 7)]
              + [f"pc-q35-rhel8.{m}.0" for m in range(7)] + [f"pc-q35-rhel9.{m}.0" for m in range(0, 9, 2)]
              + ["pc-q35-rhel10.0.0", "pc-q35-rhel10.1.0", "rhel6.0.0", "rhel6.6.0", "pc", "q35"])
UPSTREAM_NAMES = ([f"pc-0.{m}" for m in range(10, 16)] + [f"pc-1.{m}" for m in range(4)]
                  + [f"pc-i440fx-1.{m}" for m in range(4, 8)] + [f"pc-q35-1.{m}" for m in range(4, 8)]
                  + [f"pc-{f}-{v}" for f in ("i440fx", "q35") for v in
                     [f"2.{m}" for m in range(13)] + [f"3.{m}" for m in range(2)] + [f"4.{m}" for m in range(3)]
                     + [f"5.{m}" for m in range(3)] + [f"6.{m}" for m in range(3)] + [f"7.{m}" for m in range(3)]
                     + [f"8.{m}" for m in range(3)] + [f"9.{m}" for m in range(3)] + [f"10.{m}" for m in range(3)]]
                  + ["pc-q35-4.0.1", "pc", "q35", "isapc", "microvm", "xenfv", "xenfv-3.1", "xenfv-4.2", "xenpv",
                     "none"])


@pytest.mark.parametrize("build,names", [(UPSTREAM, UPSTREAM_NAMES), (UBUNTU, UBUNTU_NAMES + UPSTREAM_NAMES),
                                           (RHEL, RHEL_NAMES)])
def test_every_machine_name_of_every_build_is_classified(build, names):
    unknown = [n for n in names if (m := classify(n, build)) is None or m.family == "unknown"]
    assert not unknown
    pcs = [classify(n, build) for n in names if n.startswith("pc")]
    assert all(m.is_pc and (m.low is not None or m.name in ("pc", "q35")) for m in pcs)


def test_not_versions():
    for name in ("pc-q35-7.2\n", "pc-q35-٧.٢", "pc-q35-7.2 ", "pc-q35-rhel9.٢.0"):
        assert claimants(name) == []


@pytest.mark.parametrize("name,low,high,irqchip", [
    ("pc-q35-jammy", (6, 2), (6, 2), "on"), ("pc-i440fx-focal", (4, 0), (4, 0), "on"),
    ("pc-q35-focal", (4, 2), (4, 2), "on"), ("pc-q35-cosmic", (2, 11), (2, 11), "on"),
    ("pc-q35-cosmic-hpb", (2, 12), (2, 12), "on"), ("pc-i440fx-hirsute-hpb", (5, 1), (5, 1), "on"),
    ("pc-q35-eoan", (4, 0), (4, 0), "on"),  # unlike upstream pc-q35-4.0
    ("pc-q35-eoan-hpb", (4, 0), (4, 0), "on"),  # calls pc_q35_eoan_machine_options
    ("pc-i440fx-wily", (2, 4), (2, 4), "on"),
    ("pc-i440fx-utopic", (2, 1), (2, 1), "on"), ("pc-i440fx-vivid", (2, 3), (2, 3), "on"),  # old, not newest
    ("pc-q35-zapotec", None, None, "on"),  # no release defines it: its level is not known
    ("pc-q35-foo", None, None, "on"),
])
def test_ubuntu_names_map_to_their_upstream_options(name, low, high, irqchip):
    m = classify(name, UBUNTU)
    assert (m.low, m.high, m.irqchip) == (low, high, irqchip), m.how
    assert classify("pc-q35-4.0", UBUNTU).irqchip == "split"


@pytest.mark.parametrize("name,description,release,low,high", [
    ("pc-q35-zapotec", "Ubuntu 26.10 PC (Q35 + ICH9, 2009)", None, (10, 2), None),  # after resolute
    ("pc-q35-zapotec", "Ubuntu 26.10 PC (Q35 + ICH9, 2009)", (11, 0, 1), (10, 2), (11, 0)),  # not newer than QEMU
    ("pc-q35-noblex", "Ubuntu 24.04 PC v3 (Q35 + ICH9, 2009)", None, (8, 2), (8, 2)),  # a new noble variant
    ("pc-q35-noblex", "Ubuntu 24.07 PC (Q35 + ICH9, 2009)", None, (8, 2), (9, 0)),  # between noble and oracular
    ("pc-q35-zapotec", "Standard PC (Q35 + ICH9, 2009)", None, None, None),  # says nothing
])
def test_an_unknown_ubuntu_name_is_dated_by_qemus_own_description(name, description, release, low, high):
    m = classify(name, UBUNTU, release=release, description=description)
    assert (m.low, m.high) == (low, high), m.how


def test_ubuntu_names_by_release_of_the_build():
    assert classify("pc-i440fx-utopic", UBUNTU, release=(2, 2, 0)).version == (2, 2)  # vivid's build: the newest
    m = classify("pc-i440fx-utopic", UBUNTU, release=(8, 2, 2))
    assert m.version == (2, 1) and "not defined by QEMU 8.2.2" in m.how
    assert classify("pc-q35-trusty", UBUNTU).low is None  # trusty was i440fx only


def test_unknown_rhel_versions_are_rhel_bounded_by_their_neighbours():
    m = classify("pc-q35-rhel9.5.0", RHEL)
    assert (m.low, m.high) == ((8, 2), (9, 1))
    m = classify("pc-q35-rhel10.4.0", RHEL)
    assert (m.low, m.high, m.own_version) == ((10, 1), None, (10, 4, 0))
    assert classify("rhel6.6.0", RHEL).high == (1, 5)


def dom(machine, cpu="", vtype="kvm"):
    mattr = f" machine='{machine}'" if machine else ""
    return domain.extract(etree.fromstring(
        f"<domain type='{vtype}'><name>t</name><vcpu>2</vcpu><os><type arch='x86_64'{mattr}>hvm</type></os>"
        f"{cpu}<devices/></domain>"))


SVM_HOST = {(0x80000001, "ecx"): 1 << 2, (0x40000001, "eax"): 0x1FFFF, (1, "ecx"): 1 << 21}
EPYC = "<cpu mode='custom'><model>EPYC</model></cpu>"


def test_ubuntu_leaves_svm_to_the_model_even_on_upstream_named_machines():
    for machine in ("pc-q35-jammy", "pc-q35-6.2"):
        r = resolve.resolve(dom(machine, EPYC), HostFacts(cpuid=SVM_HOST, qemu_build="ubuntu", build_source="t"))
        assert r.features["svm"].state == "on", r.features["svm"]
    r = resolve.resolve(dom("pc-q35-6.2", EPYC), HostFacts(cpuid=SVM_HOST, qemu_build="upstream", build_source="t"))
    assert r.features["svm"].state == "off"
    # Build unknown, upstream name: both are possible, so svm depends on the build.
    r = resolve.resolve(dom("pc-q35-6.2", EPYC), HostFacts(cpuid=SVM_HOST))
    assert r.features["svm"].state == "host-dependent" and "ubuntu: on" in r.features["svm"].detail


def test_ubuntu_guests_get_the_fix_and_rhel_guests_do_not_need_it():
    for machine in ("pc-q35-jammy", "pc-i440fx-focal", "pc-q35-noble", "pc-q35-jammy-hpb", "ubuntu", None):
        r = resolve.resolve(dom(machine), HostFacts(qemu_build="ubuntu", build_source="t"))
        d = decision.decide(r, "compat")
        assert (r.features["kvm-pv-unhalt"].state, d.action) == ("off", "inject"), (machine, d.reason)
    for machine in ("pc-q35-rhel9.6.0", "pc-q35-rhel10.0.0", "pc-i440fx-rhel7.6.0"):
        r = resolve.resolve(dom(machine), HostFacts())
        assert r.build == "rhel" and r.features["kvm-pv-unhalt"].state == "on"
        assert r.features["l3-cache"].state == "on"  # compat level known well enough
        assert decision.decide(r, "compat").rule == "already-on"
    assert decision.decide(resolve.resolve(dom("pc-i440fx-xenial"), HostFacts()), "compat").rule == "machine-too-old"


def test_absent_machine_is_the_builds_default():
    assert resolve.resolve(dom(None), HostFacts(qemu_build="ubuntu", build_source="t")).machine.alias_of == "ubuntu"
    r = resolve.resolve(dom(None), HostFacts(qemu_build="rhel", build_source="t"))
    assert r.machine.alias_of == "pc-i440fx-rhel7.6.0" and r.features["kvm-pv-unhalt"].state == "on"
    r = resolve.resolve(dom(None), HostFacts())
    assert r.features["kvm-pv-unhalt"].state == "host-dependent" and "rhel: on" in r.features["kvm-pv-unhalt"].detail


@pytest.mark.parametrize("text,build", [
    ("QEMU emulator version 8.2.2 (Debian 1:8.2.2+ds-0ubuntu1.4)", "ubuntu"),
    ("QEMU emulator version 6.2.0 (Debian 1:6.2+dfsg-2ubuntu6.22)", "ubuntu"),
    ("QEMU emulator version 9.1.0 (qemu-kvm-9.1.0-15.el9_6)", "rhel"),
    ("QEMU emulator version 6.2.0 (qemu-kvm-6.2.0-53.module+el8.10.0+2055+8eb7870b.4)", "rhel"),
    ("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)", "upstream"),
    ("QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)", "upstream"),
    ("QEMU emulator version 9.2.0", "upstream"),
])
def test_build_from_version_string(text, build):
    assert build_from_version(text + "\nCopyright ...", "qemu --version").qemu_build == build


def test_build_from_capabilities_machine_list():
    assert build_from_machines({"pc-i440fx-noble", "ubuntu", "pc-i440fx-8.2", "pc"})[0] == "ubuntu"
    assert build_from_machines({"pc-q35-rhel9.6.0", "q35", "pc"})[0] == "rhel"
    assert build_from_machines({"pc-q35-7.2", "pc"})[0] == "upstream"
    assert build_from_machines({"pc"}, "/usr/libexec/qemu-kvm")[0] == "rhel"


def test_explain_names_the_build_and_why():
    r = resolve.resolve(dom("pc-q35-jammy"), HostFacts())
    assert r.build == "ubuntu" and "exists only in Ubuntu's QEMU" in r.build_basis
    r = resolve.resolve(dom("pc-q35-rhel9.6.0"), HostFacts())
    assert r.build == "rhel" and "RHEL" in r.build_basis
    r = resolve.resolve(dom("pc-q35-6.2"), HostFacts(qemu_build="ubuntu", build_source="qemu --version: X"))
    assert r.build_basis == "ubuntu: qemu --version: X"
    r = resolve.resolve(dom("pc-q35-jammy"), HostFacts(qemu_build="upstream", build_source="t"))
    assert r.build == "ubuntu" and any("does not exist in upstream QEMU" in w for w in r.warnings)


def test_adding_a_release_is_data_only():
    """A new Ubuntu release is one Release row; nothing else changes."""
    from virtxml_cpu.tables.builds.model import Release

    table = UBUNTU.tables[0]
    newer = table._replace(releases=table.releases + (Release("stonking", {"pc-i440fx": (11, 0), "pc-q35": (11, 0)},
                                                              "test"),))
    build = UBUNTU._replace(tables=(newer,))
    assert classify("pc-q35-stonking", build).version == (11, 0)
    assert classify("pc-q35-stonking", UBUNTU).low is None
    assert set(BUILDS) == {"upstream", "ubuntu", "rhel"}


# --- detection order, through the CLI and the hook ------------------------------------------------------


UBUNTU_VERSION = "QEMU emulator version 8.2.2 (Debian 1:8.2.2+ds-0ubuntu1.4)"


@pytest.fixture
def fake_qemu():
    """A qemu-system-x86_64 that prints Ubuntu's version string and records who ran it, in a directory
    every user may traverse (as root the probe runs it unprivileged); a decoy qemu-system-x86_64 first on
    explain's PATH, which records that it was run; an empty directory for libvirt's capabilities cache."""
    import shutil
    import tempfile
    from pathlib import Path

    base = Path(tempfile.mkdtemp(prefix="vxc-fake-qemu-"))
    base.chmod(0o755)
    for d in ("bin", "decoy", "caps"):
        (base / d).mkdir(mode=0o755)
    for name in ("runs", "decoy-runs"):
        (base / name).touch(mode=0o666)
        (base / name).chmod(0o666)
    qemu = base / "bin" / "qemu-system-x86_64"
    qemu.write_text(f"#!/bin/sh\nid -u >> {base / 'runs'}\necho '{UBUNTU_VERSION}'\necho 'Copyright'\n")
    qemu.chmod(0o755)
    decoy = base / "decoy" / "qemu-system-x86_64"
    decoy.write_text(f"#!/bin/sh\nid -u >> {base / 'decoy-runs'}\necho '{DECOY_VERSION}'\n")
    decoy.chmod(0o755)
    yield base
    shutil.rmtree(base)


DECOY_VERSION = "QEMU emulator version 9.2.0 (Decoy 1)"
# explain as `python -m virtxml_cpu` runs it, with libvirt's capabilities cache in the test's directory
EXPLAIN = ("import sys; from virtxml_cpu.host import caps_cache; caps_cache.CACHE_DIR = sys.argv.pop(1); "
           "from virtxml_cpu.cli import run; run()")


def explain(tmp, *args, config=None):
    """`explain --format json` with the decoy first on PATH and libvirt's cache in tmp/caps."""
    env = dict(os.environ, PATH=f"{tmp}/decoy:/usr/bin:/bin")
    env.pop("VIRTXML_CPU_CONFIG", None)
    if config:
        (tmp / "c.toml").write_text(config)
        args = args + ("--config", str(tmp / "c.toml"))
    xml = (b"<domain type='kvm'><name>t</name><vcpu>2</vcpu><os><type arch='x86_64' machine='pc-q35-6.2'>hvm"
           b"</type></os><cpu mode='custom'><model>EPYC</model></cpu><devices/></domain>")
    r = subprocess.run([sys.executable, "-c", EXPLAIN, str(tmp / "caps"), "explain", "--format", "json", *args, "-"],
                       input=xml, capture_output=True, cwd=ROOT, env=env, check=True)
    return json.loads(r.stdout)


def libvirts_emulator(tmp, version: int | None = 8002002) -> str:
    """libvirt's capabilities cache in tmp/caps names the Ubuntu QEMU (not the decoy) as its x86_64
    emulator; with `version` None the cache has no release, so explain has to ask that QEMU itself."""
    qemu = str(tmp / "bin" / "qemu-system-x86_64")
    caps_cache(tmp / "caps", qemu, "Debian 1:8.2.2+ds-0ubuntu1.4", version,
               machines=("pc-q35-6.2", "pc-q35-noble", "pc-i440fx-noble"))
    return qemu


def test_detection_order_option_config_local_qemu(fake_qemu):
    """The local QEMU is libvirt's emulator, as its capabilities cache names it (read, not run), never
    the first on PATH."""
    qemu = libvirts_emulator(fake_qemu)
    d = explain(fake_qemu)
    assert d["qemu_build"] == "ubuntu" and d["qemu_build_basis"] == (
        f"ubuntu: libvirt's capabilities cache for {qemu}: package Debian 1:8.2.2+ds-0ubuntu1.4")
    assert (fake_qemu / "decoy-runs").read_text() == "" and (fake_qemu / "runs").read_text() == ""
    assert "enable-svm-by-default" in d["features"]["svm"]["detail"]  # (then filtered if this KVM lacks svm)
    d = explain(fake_qemu, config='qemu_build = "upstream"\n')
    assert d["qemu_build"] == "upstream" and "qemu_build in" in d["qemu_build_basis"]
    d = explain(fake_qemu, "--qemu-build", "ubuntu", config='qemu_build = "upstream"\n')
    assert d["qemu_build_basis"] == "ubuntu: --qemu-build"
    d = explain(fake_qemu, "--no-host-probe")  # no local probe: the machine name alone
    assert d["qemu_build"] == "upstream|ubuntu" and d["features"]["svm"]["state"] == "host-dependent"


def test_config_rejects_an_unknown_build(fake_qemu):
    with pytest.raises(subprocess.CalledProcessError) as e:
        explain(fake_qemu, config='qemu_build = "debian"\n')
    assert e.value.returncode == 2 and b"qemu_build" in e.value.stderr


def test_local_probe_runs_only_a_trusted_binary_and_never_as_root(fake_qemu):
    from virtxml_cpu.host.local_qemu import ask

    qemu = fake_qemu / "bin" / "qemu-system-x86_64"
    assert ask(str(qemu))[0].qemu_build == "ubuntu"
    uids = (fake_qemu / "runs").read_text().split()
    assert uids and "0" not in uids  # as root: run as libvirt-qemu/nobody, as libvirt runs QEMU
    for writable in (qemu, qemu.parent):  # a binary or directory others could change is never run
        writable.chmod(writable.stat().st_mode | 0o022)
        facts, why = ask(str(qemu))
        assert facts == HostFacts() and why.startswith("not asked (") and "writable by group or others" in why
        writable.chmod(writable.stat().st_mode & ~0o022)
    assert len((fake_qemu / "runs").read_text().split()) == len(uids)


def test_hook_reads_the_build_from_libvirts_capabilities_cache_and_runs_nothing(fake_qemu, tmp_path):
    from virtxml_cpu.hook import evaluate
    from virtxml_cpu.core.config import Config

    qemu = str(fake_qemu / "bin" / "qemu-system-x86_64")
    caps_cache(tmp_path / "caps", qemu, "Debian 1:8.2.2+ds-0ubuntu1.4")
    dom = domain.extract(etree.fromstring(
        (FIXTURES / "handwritten-no-cpu.xml").read_bytes().replace(b"</devices>", f"<emulator>{qemu}</emulator></devices>".encode())))
    facts = evaluate.hook_host_facts(dom, Config(), str(tmp_path / "caps"))
    assert facts.qemu_build == "ubuntu" and facts.qemu_version == (8, 2, 2) and "0ubuntu1.4" in facts.build_source
    assert facts.aliases == {"q35": "pc-q35-noble", "pc": "pc-i440fx-noble", "": "pc-i440fx-noble"}
    assert "pc-tcg-only" not in facts.machines and (fake_qemu / "runs").read_text() == ""
    assert evaluate.hook_host_facts(dom, Config(qemu_build="rhel", path="c.toml")).qemu_build == "rhel"
    other = dom._replace(emulator="/usr/bin/qemu-system-other")
    unknown = evaluate.hook_host_facts(other, Config(), str(tmp_path / "caps"))
    assert unknown.qemu_build is None and unknown.unused[-1] == (
        "libvirt's capabilities cache: libvirt has no capabilities cached for /usr/bin/qemu-system-other"), unknown


def test_release_sources_and_their_order(fake_qemu):
    """--qemu-version > --emulator > config > libvirt > the local binary; each named in explain. The local
    binary is libvirt's emulator: asked itself when libvirt's cache of it has no release."""
    qemu = libvirts_emulator(fake_qemu, version=None)
    d = explain(fake_qemu)
    assert d["qemu_release"] == f"release 8.2.2 (from {qemu} --version: {UBUNTU_VERSION})"
    assert (fake_qemu / "runs").read_text() and (fake_qemu / "decoy-runs").read_text() == ""
    d = explain(fake_qemu, "--qemu-version", "5.2")
    assert d["qemu_release"] == "release 5.2 (from --qemu-version)" and d["qemu_build"] == "ubuntu"
    d = explain(fake_qemu, config='qemu_version = "6.2.0"\n')
    assert d["qemu_release"].startswith("release 6.2.0 (from qemu_version in ")
    d = explain(fake_qemu, "--no-host-probe")
    assert d["qemu_release"] == "release not known (taken as current)"
    other = fake_qemu / "bin" / "qemu-kvm"
    other.write_text("#!/bin/sh\necho 'QEMU emulator version 9.1.0 (qemu-kvm-9.1.0-15.el9_6)'\n")
    other.chmod(0o755)
    d = explain(fake_qemu, "--emulator", str(other), config='qemu_version = "6.2.0"\n')
    assert d["qemu_release"].startswith(f"release 9.1.0 (from {other} --version")
    # RHEL's qemu-kvm has no pc-q35-6.2: resolved where it exists, and said so
    assert d["qemu_build"] == "upstream|ubuntu" and any("does not exist in RHEL" in n for n in d["decision"]["notes"])


def test_capabilities_files_do_not_settle_the_build_over_the_local_binary(fake_qemu):
    libvirts_emulator(fake_qemu, version=None)
    d = explain(fake_qemu, "--capabilities", str(FIXTURES / "host" / "capabilities.xml"))
    assert d["qemu_build"] == "ubuntu" and UBUNTU_VERSION in d["qemu_build_basis"]
    assert (fake_qemu / "decoy-runs").read_text() == ""


def test_without_libvirts_cache_the_local_qemu_is_the_first_on_path(fake_qemu):
    d = explain(fake_qemu)
    assert d["qemu_build"] == "upstream" and d["qemu_build_basis"] == (
        f"upstream: {fake_qemu}/decoy/qemu-system-x86_64 --version: {DECOY_VERSION}")
    assert (fake_qemu / "decoy-runs").read_text() and (fake_qemu / "runs").read_text() == ""


@pytest.mark.parametrize("args", [("--qemu-version", "7"), ("--qemu-version", "7.2.x"), ("--emulator", "/bin/true")])
def test_bad_release_sources_are_usage_errors(fake_qemu, args):
    with pytest.raises(subprocess.CalledProcessError) as e:
        explain(fake_qemu, *args)
    last = e.value.stderr.decode().splitlines()[-1]
    assert e.value.returncode == 2 and ("not a QEMU release" in last or "answers --version" in last), last


def test_a_name_the_release_does_not_define_is_said_so():
    r = resolve.resolve(dom("pc-i440fx-utopic"), HostFacts(qemu_build="ubuntu", build_source="t",
                                                           qemu_version=(8, 2, 2)))
    assert r.machine.version == (2, 1) and any("QEMU 8.2.2 (Ubuntu's QEMU) has no machine type pc-i440fx-utopic"
                                               in w for w in r.warnings), r.warnings
    assert r.machine_status == "not-offered"


def test_a_non_qemu_drivers_version_is_no_qemu_release():
    """libvirt's test driver (and any other) answers getVersion with its own version, not QEMU's."""
    libvirt = pytest.importorskip("libvirt", reason="libvirt-python is not installed: the test driver's "
                                  "getVersion check is SKIPPED")
    from virtxml_cpu.host.connection import host_facts_from

    conn = libvirt.openReadOnly("test:///default")
    try:
        facts = host_facts_from(conn, "test:///default")
    finally:
        conn.close()
    assert facts.qemu_version is None and facts.version_source == ""


def test_one_rule_picks_the_build_source_order_then_the_machine_name():
    """core/precedence.py holds the whole rule: settle() over the sources' claims, then the machine-name step
    (builds_for); core/merge.py only merges what the builds it was handed answer."""
    import inspect

    from virtxml_cpu.core import precedence, merge

    def step(name, **host):
        builds, basis, warnings = precedence.builds_for(name, HostFacts(**host))
        return [(f.name, m.family) for f, m in builds], basis, warnings

    ubuntu, rhel = dict(qemu_build="ubuntu", build_source="t"), dict(qemu_build="rhel", build_source="t")
    assert step("pc-q35-noble", **ubuntu) == ([("ubuntu", "pc-q35")], "ubuntu: t", [])  # the settled build has it
    builds, basis, warnings = step("pc-q35-noble", **rhel)  # it lacks it: the machine name wins, said so
    assert builds == [("ubuntu", "pc-q35")] and basis.startswith("ubuntu: machine pc-q35-noble exists only in")
    assert warnings == ["machine type pc-q35-noble does not exist in RHEL/CentOS qemu-kvm (t); resolved as Ubuntu's "
                        "QEMU, where it does"], warnings
    assert step("nonesuch", **rhel) == ([("rhel", "unknown")], "rhel: t", [])  # nobody has it
    builds, basis, _ = step("pc-q35-6.2")  # no build named: each build that has the name
    assert builds == [("upstream", "pc-q35"), ("ubuntu", "pc-q35")] and basis.startswith("not known (upstream or ubuntu")
    builds, basis, _ = step("nonesuch")  # nor does any build have it: upstream, the machine unknown
    assert builds == [("upstream", "unknown")] and basis.startswith("upstream: no QEMU build has this machine name")
    assert precedence.chosen(HostFacts()) is None and precedence.chosen(HostFacts(**rhel)) is RHEL
    # one QEMU's own word: a downstream package string, else its own downstream machine names, else upstream
    assert precedence.own_build("upstream", "ubuntu", "m") == ("ubuntu", "m")
    assert precedence.own_build("rhel", "ubuntu", "m") == ("rhel", None)
    assert precedence.own_build("upstream", None, "") == precedence.own_build("upstream", "upstream", "m") == (
        "upstream", None)
    own = [n for n, f in inspect.getmembers(merge, inspect.isfunction) if f.__module__ == merge.__name__]
    assert own == ["merge"]

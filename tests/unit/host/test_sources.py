"""One order for every shell: explain, audit, the hook and verify give the same QEMU build, release and
decision for the same host sources, and that answer is the documented order's (precedence.HOST_FACT_SOURCES).

Five sources, each saying something different: the --qemu-version flag, the config, libvirt's
capabilities cache, a libvirt connection, the local QEMU. Every source alone and every pair is run
through each shell that can be given it, as that shell builds its sources; /dev/kvm is one recorded
answer for all (it names neither build nor release).
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import re
import tempfile
from pathlib import Path

import pytest

from virtxml_cpu.live import audit
from virtxml_cpu import cli
from virtxml_cpu.cli.live import live_sources
from virtxml_cpu.hook import evaluate
from virtxml_cpu.host import sources, connection, reader
from virtxml_cpu.core import pipeline, precedence
from virtxml_cpu.verify import run as verify
from virtxml_cpu.core import config as config_file
from virtxml_cpu.core.config import Config
from virtxml_cpu.core.hostfacts import HostFacts
from virtxml_cpu.host.sources import HostSources, assemble
from virtxml_cpu.tables.version import format_version, parse_version

from tests.support import ROOT, Capture, recorded_host

# What each source says: (its source in the order, release, build or None, what `q35` stands for).
SAYS = {
    "flag": ("command line", "2.10", None, None),  # --qemu-version 2.10
    "config": ("config", "6.2", None, None),  # qemu_version = "6.2"
    "connection": ("libvirt", "7.2.22", None, "pc-q35-7.2"),  # libvirt 7002022, upstream names only (see WEAK)
    "cache": ("libvirt", "8.2.2", "ubuntu", "pc-q35-noble"),  # libvirt's capabilities cache (after the connection)
    "local": ("local QEMU", "9.1.0", "upstream", "pc-q35-9.1"),  # qemu-system-x86_64 --version, -machine help
}
WEAK = {"connection": ("upstream names", "upstream")}  # libvirt's upstream-only machine list names the build last
ORDER = [s.said for s in precedence.HOST_FACT_SOURCES]
SOURCES = tuple(SAYS)
COMBOS = [c for n in (1, 2) for c in itertools.combinations(SOURCES, n)]
DOMAIN = ("<domain type='kvm'><name>g</name><uuid>6c3d2a3e-0d5b-4f0e-9b1e-2d0c1e9a7f10</uuid><vcpu>2</vcpu>"
          "<os><type arch='x86_64' machine='{machine}'>hvm</type></os><devices><emulator>{qemu}</emulator>"
          "</devices></domain>")
CAPS = ("<capabilities><host/><guest><os_type>hvm</os_type><arch name='x86_64'>"
        "<emulator>/usr/bin/qemu-system-x86_64</emulator><machine canonical='pc-i440fx-7.2'>pc</machine>"
        "<machine>pc-i440fx-7.2</machine><machine canonical='pc-q35-7.2'>q35</machine><machine>pc-q35-7.2</machine>"
        "</arch></guest></capabilities>")
MACHINE_HELP = ("Supported machines are:\n"
                "pc                   Standard PC (i440FX + PIIX, 1996) (alias of pc-i440fx-9.1)\n"
                "pc-i440fx-9.1        Standard PC (i440FX + PIIX, 1996) (default)\n"
                "q35                  Standard PC (Q35 + ICH9, 2009) (alias of pc-q35-9.1)\n"
                "pc-q35-9.1           Standard PC (Q35 + ICH9, 2009)\n")


def expected(combo):
    """The documented order applied by hand: the first source naming each fact (within libvirt, the
    connection before its capabilities cache)."""
    ranked = sorted(combo, key=lambda s: (ORDER.index(SAYS[s][0]), s == "cache"))
    release = next((SAYS[s][1] for s in ranked), None)
    builds = sorted([(ORDER.index(SAYS[s][0]), SAYS[s][2]) for s in combo if SAYS[s][2]]
                    + [(ORDER.index(WEAK[s][0]), WEAK[s][1]) for s in combo if s in WEAK])
    alias = next((SAYS[s][3] for s in ranked if SAYS[s][3]), None)
    return (builds[0][1] if builds else None), parse_version(release), alias


# ---------------------------------------------------------------------------------------------------------
# The stand-ins: a local QEMU, libvirt's cache of it, a libvirt connection, /dev/kvm.

@pytest.fixture
def world(monkeypatch):
    """A directory every user may traverse (as root the local QEMU runs unprivileged) with a QEMU that
    answers as SAYS["local"], an empty capabilities cache directory and a config file."""
    base = Path(tempfile.mkdtemp(prefix="vxc-sources-"))
    base.chmod(0o755)
    (base / "bin").mkdir(mode=0o755)
    (base / "empty").mkdir(mode=0o755)
    (base / "caps").mkdir(mode=0o755)
    qemu = base / "bin" / "qemu-system-x86_64"
    qemu.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'QEMU emulator version 9.1.0'; "
                    f"else cat <<'EOF'\n{MACHINE_HELP}EOF\nfi\n")
    qemu.chmod(0o755)
    monkeypatch.setattr(sources, "probe_kvm", lambda: HostFacts(cpuid=recorded_host().cpuid, sources=("kvm",)))
    monkeypatch.setattr(sources.caps_cache, "CACHE_DIR", str(base / "caps"))
    monkeypatch.setattr(connection, "libvirt_module", lambda: FakeLibvirt)
    monkeypatch.setattr(audit, "libvirt_module", lambda: FakeLibvirt)
    monkeypatch.setattr(reader, "libvirt_module", lambda: FakeLibvirt)  # no libvirt-python needed
    monkeypatch.setattr(connection, "open_for_reading", lambda uri, timeout=None: FakeConn(str(qemu)))
    monkeypatch.setattr(audit, "open_for_reading", lambda uri, timeout=None: FakeConn(str(qemu)))
    monkeypatch.delenv("VIRTXML_CPU_CONFIG", raising=False)
    yield base
    import shutil

    shutil.rmtree(base)


class FakeLibvirt:
    class libvirtError(Exception):
        def get_error_message(self):
            return str(self)

    VIR_CONNECT_LIST_DOMAINS_PERSISTENT, VIR_CONNECT_LIST_DOMAINS_ACTIVE, VIR_DOMAIN_XML_INACTIVE = 4, 1, 2
    VIR_CONNECT_LIST_DOMAINS_TRANSIENT = 8
    VIR_DOMAIN_XML_SECURE = 1


class FakeDomain:
    def __init__(self, xml):
        self.xml = xml

    def name(self):
        return "g"

    def UUIDString(self):
        return "6c3d2a3e-0d5b-4f0e-9b1e-2d0c1e9a7f10"

    def XMLDesc(self, flags=0):
        return self.xml


class FakeConn:
    """libvirt's answers as SAYS["connection"]: QEMU 7.2.22, upstream machine names only."""

    def __init__(self, qemu):
        self.dom = FakeDomain(DOMAIN.format(machine="q35", qemu=qemu))

    def getCapabilities(self):
        return CAPS

    def getDomainCapabilities(self, *args):
        raise FakeLibvirt.libvirtError("read-only")

    def getType(self):
        return "QEMU"

    def getVersion(self):
        return 7002022

    def listAllDomains(self, flags=0):
        # one persistent domain, shut off
        return [] if flags in (FakeLibvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE,
                               FakeLibvirt.VIR_CONNECT_LIST_DOMAINS_TRANSIENT) else [self.dom]

    def close(self):
        pass


def cache(base: Path, qemu: str) -> None:
    """libvirt's capabilities cache for `qemu` as SAYS["cache"] (named as libvirt names it)."""
    name = hashlib.sha256(qemu.encode()).hexdigest() + ".xml"
    (base / "caps" / name).write_text(
        f"<qemuCaps><emulator>{qemu}</emulator><version>8002002</version>"
        "<package>Debian 1:8.2.2+ds-0ubuntu1.4</package>"
        "<machine type='kvm' name='pc-q35-noble' alias='q35'/>"
        "<machine type='kvm' name='pc-i440fx-noble' alias='pc' default='yes'/></qemuCaps>")
    (base / "caps" / name).chmod(0o644)


# ---------------------------------------------------------------------------------------------------------
# Each shell, given the sources as a user gives them.

def setup(world: Path, combo, monkeypatch) -> str:
    """The sources of `combo` in place; returns the config path."""
    qemu = str(world / "bin" / "qemu-system-x86_64")
    if "cache" in combo:
        cache(world, qemu)
    # the local QEMU is found when it is a source, or libvirt's cache of it is
    monkeypatch.setenv("PATH", str(world / "bin") if {"local", "cache"} & set(combo) else str(world / "empty"))
    cfg = world / "config.toml"
    cfg.write_text('qemu_version = "6.2"\n' if "config" in combo else "# nothing\n")
    return str(cfg)


def build_release_decision(facts: HostFacts, machine="q35"):
    o = pipeline.process(DOMAIN.format(machine=machine, qemu="/x").encode(), "g", facts, Config(), render=False)
    m = o.resolution.machine
    return (facts.qemu_build, facts.qemu_version, o.decision.action, o.decision.rule, m.alias_of or m.name,
            o.resolution.features["kvm-pv-unhalt"].state, o.decision.reason)


def via_explain(world, combo, capsys):
    args = ["explain", "--format", "json", "--config", str(world / "config.toml")]
    if "flag" in combo:
        args += ["--qemu-version", "2.10"]
    if "connection" in combo:
        args += ["--connect", "test:///fake"]
    xml = world / "g.xml"
    xml.write_text(DOMAIN.format(machine="q35", qemu="/x"))
    assert cli.main(args + [str(xml)]) == 0
    d = json.loads(capsys.readouterr().out)
    m = re.match(r"release (\S+) \(from ", d["qemu_release"])
    build = d["qemu_build"] if "|" not in d["qemu_build"] else None
    return (build, parse_version(m.group(1)) if m else None, d["decision"]["action"], d["decision"]["rule"],
            d["machine_resolved"], d["features"]["kvm-pv-unhalt"]["state"], d["decision"]["reason"])


def via_audit(world, combo, monkeypatch):
    seen = []
    real = audit.process

    def spy(data, label, host, *a, **k):
        seen.append(host)
        return real(data, label, host, *a, **k)

    monkeypatch.setattr(audit, "process", spy)
    args = cli.build_parser().parse_args(["audit", "--config", str(world / "config.toml")]
                                         + (["--qemu-version", "2.10"] if "flag" in combo else []))
    cfg = config_file.load(args.config)
    res = audit.audit_host("test:///fake", audit.AuditOptions(cfg, sources=live_sources(args, cfg)))
    assert res.error is None, res.error
    row = res.rows[0]
    host = seen[0]
    return (host.qemu_build, host.qemu_version, row.decision.action, row.decision.rule,
            build_release_decision(host)[4], row.pv_unhalt, row.decision.reason)


def via_hook(world, combo):
    qemu = str(world / "bin" / "qemu-system-x86_64")
    log = Capture()
    cfg = world / "hook.toml"
    cfg.write_text((world / "config.toml").read_text() + f'[hook]\nspool = "{world}/spool"\n')
    assert evaluate.run(["g", "prepare", "begin", "-"], config_path=str(cfg), log=log,
                    stdin=io.BytesIO(DOMAIN.format(machine="q35", qemu=qemu).encode())) == 0
    f = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', log.lines[-1]))
    build = None if f["qemu"] == "unknown" else f["qemu"]
    release = None if f["release"] == "unknown" else parse_version(f["release"])
    return (build, release, f["decision"], f["rule"], f["machine"].strip('"').split(" = ")[-1], f["pv_unhalt"],
            f["reason"].strip('"'))


def via_verify(world, combo):
    """verify's sources for the QEMU it started (here: what it would have read over QMP from the local one)."""
    binary = verify.QemuBinary(str(world / "bin" / "qemu-system-x86_64"), (9, 1, 0), "",
                         [{"name": "pc-i440fx-9.1", "alias": "pc", "is-default": True},
                          {"name": "pc-q35-9.1", "alias": "q35"}], False, frozenset())
    cfg = config_file.load(str(world / "config.toml"))
    return build_release_decision(assemble(verify.sources(verify.VerifyOptions(config=cfg), binary)))


SHELLS = {  # which sources each shell can be given (the others it has no way to take)
    "explain": lambda c: not ({"connection", "cache"} <= set(c) or {"connection", "local"} <= set(c)),
    "audit": lambda c: "connection" in c and set(c) <= {"flag", "config", "connection"},
    "hook": lambda c: set(c) <= {"config", "cache"},
    "verify": lambda c: "local" in c and set(c) <= {"config", "local"},
}


@pytest.mark.parametrize("combo", COMBOS, ids=["+".join(c) for c in COMBOS])
def test_every_shell_gives_the_documented_orders_answer(combo, world, monkeypatch, capsys):
    setup(world, combo, monkeypatch)
    build, release, alias = expected(combo)
    got = {}
    for shell, takes in SHELLS.items():
        if not takes(combo):
            continue
        got[shell] = {"explain": lambda: via_explain(world, combo, capsys),
                      "audit": lambda: via_audit(world, combo, monkeypatch),
                      "hook": lambda: via_hook(world, combo),
                      "verify": lambda: via_verify(world, combo)}[shell]()
    # the same sources straight into assemble(), as no shell may combine them (cache or local with a connection)
    qemu = str(world / "bin" / "qemu-system-x86_64")
    direct = assemble(HostSources(
        release="2.10" if "flag" in combo else None, config=Config(qemu_version="6.2" if "config" in combo else None),
        connect=(FakeConn(qemu), "test:///fake") if "connection" in combo else None,
        caps_cache=qemu if "cache" in combo else None, local_qemu="local" in combo, kvm=True))
    got["assemble"] = build_release_decision(direct)
    assert direct.aliases.get("q35") == alias
    answers = set(got.values())
    assert len(answers) == 1, got
    (b, r, action, rule, machine, state, reason), = answers
    assert (b, r) == (build, release), (got, build, release)
    assert machine == (alias or machine)  # told what q35 stands for, every shell resolves it so


def test_each_pair_is_run_by_two_shells_where_two_can_take_it():
    """Where two shells can be given the same sources, both are (the test above compares them)."""
    shared = [c for c in COMBOS if sum(takes(c) for takes in SHELLS.values()) >= 2]
    assert {"+".join(c) for c in shared} >= {"config", "cache", "connection", "local", "config+cache",
                                             "config+connection", "config+local", "flag+connection"}


def test_a_source_that_could_not_be_used_says_why(world, monkeypatch, capsys):
    setup(world, ("local",), monkeypatch)
    (world / "bin" / "qemu-system-x86_64").chmod(0o775)  # group-writable: never run
    xml = world / "g.xml"
    xml.write_text(DOMAIN.format(machine="q35", qemu="/x"))
    assert cli.main(["explain", "--config", str(world / "config.toml"), str(xml)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"host facts: local QEMU: not asked \(\S+qemu-system-x86_64 is writable by group or others\)",
                     out), out
    assert cli.main(["explain", "--no-host-probe", "--format", "json", str(xml)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["host_facts_unused"] == ["/dev/kvm: not read (--no-host-probe)", "local QEMU: not asked (--no-host-probe)"]


@pytest.mark.skipif(os.geteuid() != 0, reason="as root only: the local QEMU runs as an unprivileged user")
def test_as_root_a_qemu_the_unprivileged_user_cannot_reach_is_not_asked_and_explain_says_so(world, monkeypatch,
                                                                                             capsys):
    setup(world, ("local",), monkeypatch)
    (world / "bin").chmod(0o700)  # root's alone: libvirt-qemu/nobody cannot search it
    xml = world / "g.xml"
    xml.write_text(DOMAIN.format(machine="q35", qemu="/x"))
    assert cli.main(["explain", "--format", "json", "--config", str(world / "config.toml"), str(xml)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["qemu_release"] == "release not known (taken as current)"
    assert any(re.fullmatch(rf"local QEMU: not asked \(as root the unprivileged user \S+ cannot reach {world}/bin\)",
                            u) for u in d["host_facts_unused"]), d["host_facts_unused"]


def test_the_hook_honours_the_configs_release_reads_the_cache_with_a_configured_build_and_logs_the_release(
        world, monkeypatch):
    qemu = str(world / "bin" / "qemu-system-x86_64")
    cache(world, qemu)
    cfg = world / "hook.toml"
    cfg.write_text(f'qemu_build = "ubuntu"\n[hook]\nspool = "{world}/spool"\n')
    log = Capture()
    xml = DOMAIN.format(machine="q35", qemu=qemu).encode()
    assert evaluate.run(["g", "prepare", "begin", "-"], config_path=str(cfg), log=log, stdin=io.BytesIO(xml)) == 0
    line = log.lines[-1]
    # the configured build, and still the cache's release and aliases (q35 is pc-q35-noble there)
    assert "qemu=ubuntu" in line and "release=8.2.2" in line and 'machine="q35 = pc-q35-noble"' in line, line
    cfg.write_text(f'qemu_version = "2.5"\n[hook]\nspool = "{world}/spool"\n')
    assert evaluate.run(["g", "prepare", "begin", "-"], config_path=str(cfg), log=log, stdin=io.BytesIO(xml)) == 0
    assert "release=2.5" in log.lines[-1] and "qemu=ubuntu" in log.lines[-1], log.lines[-1]


def test_a_configured_build_and_the_flags_go_through_the_same_order_in_explain_audit_and_verify(world, monkeypatch,
                                                                                                capsys):
    """--qemu-build over the local QEMU, in explain and verify; the config's build over libvirt's
    upstream-only names, in explain and audit."""
    setup(world, ("local",), monkeypatch)
    xml = world / "g.xml"
    xml.write_text(DOMAIN.format(machine="pc-q35-rhel9.2.0", qemu="/x"))
    assert cli.main(["explain", "--format", "json", "--qemu-build", "rhel", str(xml)]) == 0
    d = json.loads(capsys.readouterr().out)
    binary = verify.QemuBinary(str(world / "bin" / "qemu-system-x86_64"), (9, 1, 0), "", [], False, frozenset())
    v = assemble(verify.sources(verify.VerifyOptions(qemu_build="rhel"), binary))
    assert d["qemu_build"] == v.qemu_build == "rhel" and d["qemu_build_basis"] == "rhel: --qemu-build"
    assert v.build_source == "--qemu-build" and v.qemu_version == (9, 1, 0)
    (world / "config.toml").write_text('qemu_build = "rhel"\n')
    assert cli.main(["explain", "--format", "json", "--config", str(world / "config.toml"), "--connect", "test:///x",
                     str(xml)]) == 0
    d = json.loads(capsys.readouterr().out)
    a = sources.connection_facts(None, config_file.load(str(world / "config.toml")), FakeConn("/x"), "test:///x")
    assert d["qemu_build"] == a.qemu_build == "rhel" and d["qemu_release"].startswith("release 7.2.22 (from libvirt")
    assert format_version(a.qemu_version) == "7.2.22"


RHEL_HELP = """Supported machines are:
pc                   RHEL 7.6.0 PC (i440FX + PIIX, 1996) (alias of pc-i440fx-rhel7.6.0)
pc-i440fx-rhel7.6.0  RHEL 7.6.0 PC (i440FX + PIIX, 1996)
q35                  RHEL-9.2.0 PC (Q35 + ICH9, 2009) (alias of pc-q35-rhel9.2.0)
pc-q35-rhel9.2.0     RHEL-9.2.0 PC (Q35 + ICH9, 2009) (default)
pc-q35-rhel8.6.0     RHEL-8.6.0 PC (Q35 + ICH9, 2009) (deprecated)
none                 empty machine
"""


def test_told_only_rhels_binary_q35_is_what_its_machine_help_says(world, capsys):
    """RHEL 9.2's qemu-kvm: --emulator alone used to leave q35 unresolved (l3-cache, kvm-asyncpf-int
    host-dependent); its -machine help names the machine q35 stands for."""
    qemu = world / "bin" / "qemu-kvm"
    qemu.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'QEMU emulator version 7.2.0 "
                    f"(qemu-kvm-7.2.0-14.el9_2)'; exit 0; fi\ncat <<'EOF'\n{RHEL_HELP}EOF\n")
    qemu.chmod(0o755)
    xml = world / "g.xml"
    xml.write_text("<domain type='kvm'><name>g</name><vcpu>2</vcpu><os><type arch='x86_64' machine='q35'>hvm</type>"
                   "</os><cpu mode='custom'><model>EPYC</model></cpu><devices/></domain>")
    assert cli.main(["explain", "--format", "json", "--emulator", str(qemu), str(xml)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["qemu_build"] == "rhel" and d["machine_resolved"] == "pc-q35-rhel9.2.0"
    assert [p for p, v in d["features"].items() if v["state"] == "host-dependent"] == []
    assert f"{qemu} -machine help" in d["host_facts"]


def test_machine_help_gives_names_aliases_the_default_and_descriptions():
    from virtxml_cpu.core.hostfacts import parse_machine_help

    f = parse_machine_help(RHEL_HELP, "/usr/libexec/qemu-kvm")
    assert f.aliases == {"pc": "pc-i440fx-rhel7.6.0", "q35": "pc-q35-rhel9.2.0", "": "pc-q35-rhel9.2.0"}
    assert f.machines == {"pc", "pc-i440fx-rhel7.6.0", "q35", "pc-q35-rhel9.2.0", "pc-q35-rhel8.6.0"}
    assert f.descriptions["pc-q35-rhel8.6.0"] == "RHEL-8.6.0 PC (Q35 + ICH9, 2009)" and "q35" not in f.descriptions
    assert f.qemu_build == "rhel"


def test_one_ascii_version_parser_and_one_libvirt_version_decoder():
    from virtxml_cpu.core.hostfacts import decode_libvirt_version, parse_qemu_version, parse_version_line

    arabic = "QEMU emulator version \u0667.\u0662.0 (Debian 1:7.2)"  # Arabic-Indic digits: no release
    assert parse_version_line(arabic) is None and parse_qemu_version(arabic) is None
    assert parse_version_line("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7)") == ((7, 2, 22), "Debian 1:7.2+dfsg-7")
    assert parse_version_line("QEMU emulator version 7 (Debian)") is None  # X.Y[.Z] only, as everywhere
    # the first X.Y[.Z] after "version", as QEMU prints it: an earlier "version 7" passed over, a longer
    # number read to its third part
    assert parse_version_line("qemu version 7 beta, version 7.2.0") == ((7, 2, 0), "")
    assert parse_version_line("QEMU emulator version 7.2.0.1 (x)") == ((7, 2, 0), "")
    assert decode_libvirt_version(7002022) == decode_libvirt_version("7002022") == (7, 2, 22)
    assert decode_libvirt_version(10000002) == (10, 0, 2)
    for bad in (0, "", "\u0667002022", "1234567890", True, None, -1):
        assert decode_libvirt_version(bad) is None, bad


def test_one_candidate_list_and_one_unprivileged_user_rule(world, monkeypatch):
    from virtxml_cpu.host import local_qemu as host_local_qemu
    from virtxml_cpu.verify import launch as runner

    assert host_local_qemu.CANDIDATES == ("qemu-system-x86_64", "/usr/libexec/qemu-kvm")
    monkeypatch.setenv("PATH", str(world / "empty"))
    rhel = world / "bin" / "qemu-kvm"
    rhel.write_text("#!/bin/sh\n")
    rhel.chmod(0o755)
    monkeypatch.setattr(host_local_qemu, "CANDIDATES", ("qemu-system-x86_64", str(rhel)))  # as /usr/libexec/qemu-kvm
    assert host_local_qemu.find() == str(rhel)
    monkeypatch.setattr(host_local_qemu, "UNPRIVILEGED_USERS", ("root", "nobody"))  # uid 0 is never the unprivileged one
    assert [u.name for u in host_local_qemu.unprivileged_users()] == ["nobody"]
    assert not hasattr(runner, "QEMU_USERS")


RHEL_CAPS = ("<capabilities><host/><guest><os_type>hvm</os_type><arch name='x86_64'>"
             "<emulator>/usr/libexec/qemu-kvm</emulator><machine canonical='pc-q35-rhel10.0.0'>q35</machine>"
             "<machine>pc-q35-rhel10.0.0</machine><machine>pc-q35-rhel9.6.0</machine>"
             "<machine>pc-q35-rhel8.6.0</machine></arch></guest></capabilities>")


class RhelConn(FakeConn):
    """A RHEL host's libvirt: its qemu-kvm 10.1 offers rhel machine names; libvirt gives no package string."""

    def getCapabilities(self):
        return RHEL_CAPS

    def getVersion(self):
        return 10001000


def _rhel_machine(facts: HostFacts, machine: str):
    from virtxml_cpu.core import domain, resolve
    from lxml import etree

    return resolve.resolve(domain.extract(etree.fromstring(
        f"<domain type='kvm'><name>g</name><os><type arch='x86_64' machine='{machine}'>hvm</type></os><devices/>"
        "</domain>")), facts)


@pytest.mark.parametrize("uri", ["qemu+ssh://kvm01.el7.example.com/system", "qemu+ssh://kvm01.el10.example.com/system",
                                 "qemu+tls://el9.lab/system?name=x.el8"])
def test_a_host_name_in_the_uri_never_gives_the_rhel_major(uri, world):
    """The live verbs write the URI into the host facts' wording; the RHEL major comes from the package
    string alone, which libvirt does not give: pc-q35-rhel8.6.0 is neither "RHEL 7" nor deprecated here."""
    facts = sources.connection_facts(None, Config(), RhelConn("/x"), uri)
    assert facts.qemu_build == "rhel" and facts.qemu_version == (10, 1, 0)
    assert uri in facts.build_source + facts.version_source  # the wording does name the host
    r = _rhel_machine(facts, "pc-q35-rhel8.6.0")
    assert r.machine_status == "offered" and "of RHEL" not in r.machine_status_why, r.machine_status_why
    assert facts.package == ""


def test_the_rhel_major_comes_from_the_qemus_package_string_not_its_path(world, capsys):
    """explain --emulator: a directory named kvm01.el7 above the binary changes nothing; the package string
    (qemu-kvm-10.1.0-17.el10) gives RHEL 10."""
    help_text = RHEL_HELP.replace("pc-q35-rhel9.2.0 ", "pc-q35-rhel10.0.0").replace("rhel9.2.0", "rhel10.0.0")
    answers = {}
    for where in ("bin", "kvm01.el7.example.com"):
        (world / where).mkdir(mode=0o755, exist_ok=True)
        qemu = world / where / "qemu-kvm"
        qemu.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'QEMU emulator version 10.1.0 "
                        f"(qemu-kvm-10.1.0-17.el10)'; exit 0; fi\ncat <<'EOF'\n{help_text}EOF\n")
        qemu.chmod(0o755)
        r = _rhel_machine(assemble(HostSources(emulator=str(qemu))), "pc-q35-rhel8.6.0")
        answers[where] = (r.machine_status, r.machine_status_why)
    assert answers["bin"] == answers["kvm01.el7.example.com"]
    assert "of RHEL 10" in answers["bin"][1] and "RHEL 7" not in answers["bin"][1]

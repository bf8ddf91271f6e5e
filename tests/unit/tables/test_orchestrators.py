"""Guests a stack owns (tables/orchestrators.py): recognised from what the stack writes and never from a name
alone, given their stack's knob as data in explain, audit and the hook, left alone by apply and watch, and
let in by the hook in enforce and queue mode, as are guests without a persistent definition."""

from __future__ import annotations

import io
import json
import os
import re

import pytest

from virtxml_cpu import cli
from virtxml_cpu.cli.explain import json_line
from virtxml_cpu.core.config import Config
from virtxml_cpu.core.decision import fixable
from virtxml_cpu.core.hostfacts import HostFacts
from virtxml_cpu.core.pipeline import process
from virtxml_cpu.errors import EXIT_OK, EXIT_WORK_FOUND
from virtxml_cpu.hook import evaluate, persistent
from virtxml_cpu.render import explain
from virtxml_cpu.render.commands import stack_command
from virtxml_cpu.tables import orchestrators
from virtxml_cpu.tables.orchestrators import BY_NAME, STACKS

from tests.support import FIXTURES, ROOT, Capture
from tests.support.live import watching

UP = HostFacts(qemu_build="upstream", build_source="test")
PLAIN = (FIXTURES / "handwritten-no-cpu.xml").read_bytes().replace(
    b"<name>scratch</name>", b"<name>scratch</name><uuid>0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66</uuid>")
SHAPED = {"stack-nova.xml": "OpenStack Nova", "stack-ovirt.xml": "oVirt/VDSM", "stack-kubevirt.xml": "KubeVirt",
          "stack-opennebula.xml": "OpenNebula", "stack-cloudstack.xml": "Apache CloudStack"}
KUBECTL = ("kubectl patch vm web-01 -n prod --type merge -p "
           "'{\"spec\":{\"template\":{\"spec\":{\"domain\":{\"features\":{\"pvspinlock\":{}}}}}}}'")


def facts(data: bytes):
    return process(data, "x.xml", UP, Config(), render=False).resolution.facts


def with_parts(data: bytes, metadata: str = "", sysinfo: str = "", name: str | None = None) -> bytes:
    if name is not None:
        data = data.replace(b"<name>scratch</name>", f"<name>{name}</name>".encode())
    extra = (f"<metadata>{metadata}</metadata>" if metadata else "") + sysinfo
    return data.replace(b"</domain>", extra.encode() + b"</domain>")


# --- the table -------------------------------------------------------------------------------------------

def test_every_row_says_what_the_docs_table_says():
    """Each stack is a row of docs/orchestrators.md's table, with the same answer to "does an edit last"."""
    text = (ROOT / "docs" / "orchestrators.md").read_text()
    rows = {cells[0]: cells for cells in (
        [c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| "))}
    for s in STACKS:
        assert s.name in rows, f"docs/orchestrators.md has no row for {s.name}"
        assert rows[s.name][2].split(":")[0].split(" ")[0] == ("yes" if s.edits_last else "no"), s.name
        assert s.source and s.knob and s.default and s.edits_why, s.name
        if s.knob_since:
            assert s.knob_since.split(";")[0].split(":")[-1].strip().split(" ")[0] in rows[s.name][3], s.name
        if not s.recognisable:
            assert "not recognisable" in s.recognised_by, s.name


def test_the_stacks_the_task_names_are_all_there_and_the_dedicated_notes_stayed():
    names = {s.name for s in STACKS}
    assert {"OpenStack Nova", "oVirt/VDSM", "KubeVirt", "OpenNebula", "Apache CloudStack", "TrueNAS SCALE",
            "virt-install/virt-manager", "Vagrant-libvirt", "GNOME Boxes", "Unraid", "Terraform libvirt"} <= names
    assert "hint-dedicated" in BY_NAME["OpenStack Nova"].dedicated and "_get_pin_cpuset" in BY_NAME["OpenStack Nova"].dedicated
    assert "dedicatedCpuPlacement" in BY_NAME["KubeVirt"].dedicated
    assert "before_vm_start" in BY_NAME["oVirt/VDSM"].dedicated
    # the advice that was wrong: no Nova setting but host-passthrough, the VirtualMachine not the VMI
    assert "cpu_mode = host-passthrough" in BY_NAME["OpenStack Nova"].knob
    assert "spec.template.spec.domain.features.pvspinlock: {}" in BY_NAME["KubeVirt"].knob
    assert BY_NAME["KubeVirt"].knob_since == "v0.39.0" and BY_NAME["KubeVirt"].cost is None
    for name in ("OpenStack Nova", "oVirt/VDSM", "Apache CloudStack", "TrueNAS SCALE"):
        assert "live migration only between hosts with identical CPUs" in BY_NAME[name].cost


def test_a_record_has_exactly_the_keys_the_cockpit_page_reads():
    r = orchestrators.record("KubeVirt")
    assert list(r) == ["name", "edits_last", "knob", "knob_since", "default", "cost", "source"]
    assert r["edits_last"] is False and orchestrators.record(None) is None and orchestrators.record("nope") is None


# --- recognition -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("fixture", sorted(SHAPED))
def test_each_stack_shaped_fixture_is_recognised_and_rewrite_still_inserts(fixture):
    data = (FIXTURES / fixture).read_bytes()
    assert facts(data).orchestrator == SHAPED[fixture]
    out = process(data, fixture, UP, Config())
    assert out.changed and re.search(rb"<pvspinlock state=(\"on\"|'on')/>", out.output)  # what the XML hooks run


@pytest.mark.parametrize("metadata,sysinfo,who", [
    ("<ovirt-tune:qos xmlns:ovirt-tune='http://ovirt.org/vm/tune/1.0'/>", "", "oVirt/VDSM"),
    ("<one:vm xmlns:one='http://opennebula.org/xmlns/libvirt/1.0'><one:name>x</one:name></one:vm>", "", "OpenNebula"),
    ("", "<sysinfo type='smbios'><system><entry name='manufacturer'>Apache Software Foundation</entry>"
         "</system></sysinfo>", "Apache CloudStack"),
    ("", "<sysinfo type='fwcfg'/><sysinfo type='smbios'><system><entry name='product'> CloudStack KVM Hypervisor"
         "</entry></system></sysinfo>", "Apache CloudStack"),
    ("<boxes:gnome-boxes xmlns:boxes='https://wiki.gnome.org/Apps/Boxes'/>", "", "GNOME Boxes"),
    ("<vmtemplate xmlns='http://unraid' name='Ubuntu' os='ubuntu'/>", "", "Unraid"),
])
def test_metadata_and_sysinfo_name_the_stack(metadata, sysinfo, who):
    assert facts(with_parts(PLAIN, metadata, sysinfo)).orchestrator == who


@pytest.mark.parametrize("name", ["one-42", "i-2-34-VM", "r-7-VM", "prod_web", "instance-0000002a", "1_truenas"])
def test_a_name_alone_names_no_stack(name):
    assert facts(with_parts(PLAIN, name=name)).orchestrator is None


@pytest.mark.parametrize("sysinfo", [
    "<sysinfo type='smbios'><system><entry name='serial'>Apache Software Foundation</entry></system></sysinfo>",
    "<sysinfo type='smbios'><bios><entry name='vendor'>Apache Software Foundation</entry></bios></sysinfo>",
    "<sysinfo type='smbios'><system><entry name='product'>CloudStack VMware Hypervisor</entry></system></sysinfo>",
])
def test_look_alike_sysinfo_names_no_stack(sysinfo):
    assert facts(with_parts(PLAIN, sysinfo=sysinfo)).orchestrator is None


# --- fixable and the stack's command ---------------------------------------------------------------------

def test_fixable_is_needs_the_change_and_persistent_and_not_managed_unless_asked():
    assert fixable(True, True, None) and fixable(True, True, "GNOME Boxes")
    assert not fixable(True, True, "KubeVirt") and fixable(True, True, "KubeVirt", include_managed=True)
    assert not fixable(False, True, None) and not fixable(True, False, None)
    assert not fixable(True, False, "KubeVirt", include_managed=True)


@pytest.mark.parametrize("name", ["prod", "_web", "prod_", "Prod_web", "prod_web;sh", "prod_-web", "a.b_web",
                                  "prod_web\u202e", "p" * 64 + "_web", "--all_web"])
def test_no_kubectl_command_for_a_name_kubernetes_would_not_give(name):
    assert stack_command("KubeVirt", name) is None


def test_the_kubectl_command_is_built_from_namespace_and_name_and_quoted():
    assert stack_command("KubeVirt", "prod_web-01") == KUBECTL
    assert stack_command("KubeVirt", "default_a_b") is None  # "a_b" is no VirtualMachine name
    assert stack_command("KubeVirt", "default_db.v2") == KUBECTL.replace("web-01", "db.v2").replace("prod", "default")
    assert stack_command("OpenStack Nova", "prod_web-01") is None and stack_command(None, "prod_web-01") is None


def test_explain_json_and_table_give_the_stack_as_data():
    o = process((FIXTURES / "stack-kubevirt.xml").read_bytes(), "k.xml", UP, Config(), render=False)
    j = json.loads(json_line(o))
    assert j == explain.to_json(o)
    assert j["stack"] == orchestrators.record("KubeVirt") and j["fixable"] is False and j["changed"] is True
    assert j["stack_command"] == KUBECTL
    table = explain.table(o)
    assert "stack: KubeVirt: a change made in libvirt does not last; apply leaves it" in table
    assert f"stack command: {KUBECTL}" in table and "knob: the VirtualMachine's" in table
    plain = json.loads(json_line(process(PLAIN, "p.xml", UP, Config(), render=False)))
    assert (plain["stack"], plain["fixable"], plain["stack_command"]) == (None, True, None)
    boxes = process(with_parts(PLAIN, "<b:gnome-boxes xmlns:b='https://wiki.gnome.org/Apps/Boxes'/>"), "b.xml", UP,
                    Config(), render=False)
    j = json.loads(json_line(boxes))
    assert j["stack"]["edits_last"] is True and j["fixable"] is True and j["stack_command"] is None


# --- apply, audit and watch through libvirt's test driver -----------------------------------------------

def _domain(name: str, extra: str = "") -> str:
    return (f"<domain type='kvm'><name>{name}</name><memory>65536</memory><vcpu>2</vcpu>"
            f"<os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os><cpu mode='host-model'/>{extra}</domain>")


KV_META = "<metadata><kubevirt xmlns='http://kubevirt.io'><uid>1</uid></kubevirt></metadata>"
CS_SYSINFO = ("<sysinfo type='smbios'><system><entry name='manufacturer'>Apache Software Foundation</entry>"
              "<entry name='product'>CloudStack KVM Hypervisor</entry></system></sysinfo>")


@pytest.fixture
def stack_driver():
    libvirt = pytest.importorskip("libvirt", reason="libvirt-python is not installed: apply through libvirt's "
                                                    "test driver is SKIPPED")
    conn = libvirt.open("test:///default")
    doms = {"kv": conn.defineXML(_domain("prod_vxc-kv", KV_META)),
            "cs": conn.defineXML(_domain("i-2-77-VM", CS_SYSINFO)),
            "plain": conn.defineXML(_domain("vxc-stack-plain"))}
    yield conn, doms
    for d in doms.values():
        d.undefine()
    conn.close()


APPLY = ["apply", "--connect", "test:///default", "--no-host-probe", "--qemu-build", "upstream"]


def test_apply_leaves_managed_guests_and_reports_their_knob(stack_driver, capsys):
    conn, doms = stack_driver
    before = {k: d.XMLDesc(2) for k, d in doms.items()}
    assert cli.main(APPLY + ["--dry-run", "--", "prod_vxc-kv", "i-2-77-VM"]) == EXIT_OK  # no work for apply
    out, err = capsys.readouterr()
    assert "prod_vxc-kv: managed: not redefined: KubeVirt writes this definition again" in out
    assert "spec.template.spec.domain.features.pvspinlock: {}" in out and "--include-managed" in out
    assert "i-2-77-VM: managed: not redefined: Apache CloudStack" in out and "guest.cpu.mode=host-passthrough" in out
    assert "managed 2" in err and "would change 0" in err
    assert cli.main(APPLY + ["--yes", "--", "prod_vxc-kv", "i-2-77-VM", "vxc-stack-plain"]) == EXIT_OK
    out, _ = capsys.readouterr()
    assert "vxc-stack-plain: added kvm-pv-unhalt" in out
    after = {k: d.XMLDesc(2) for k, d in doms.items()}
    assert after["kv"] == before["kv"] and after["cs"] == before["cs"] and after["plain"] != before["plain"]
    assert cli.main(APPLY + ["--yes", "--include-managed", "--", "prod_vxc-kv"]) == EXIT_OK
    assert "prod_vxc-kv: added kvm-pv-unhalt" in capsys.readouterr().out
    assert "pvspinlock" in doms["kv"].XMLDesc(2)


def test_audit_names_only_what_apply_fixes_and_prints_the_stacks_command(stack_driver, capsys):
    args = ["audit", "--connect", "test:///default", "--no-host-probe", "--qemu-build", "upstream"]
    assert cli.main(args + ["--format", "json"]) == EXIT_WORK_FOUND
    records = {r["domain"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())
               if r["record"] == "domain"}
    kv, cs, plain = records["prod_vxc-kv"], records["i-2-77-VM"], records["vxc-stack-plain"]
    assert kv["stack"] == orchestrators.record("KubeVirt") and kv["fixable"] is False and kv["needs_fix"] is True
    assert kv["stack_command"] == KUBECTL.replace("web-01", "vxc-kv")
    assert cs["stack"]["name"] == "Apache CloudStack" and cs["fixable"] is False and cs["stack_command"] is None
    assert plain["stack"] is None and plain["fixable"] is True
    assert cli.main(args) == EXIT_WORK_FOUND
    out, err = capsys.readouterr()
    (fix,) = [line for line in err.splitlines() if line.startswith("fix with: ")]
    assert "vxc-stack-plain" in fix and "prod_vxc-kv" not in fix and "i-2-77-VM" not in fix
    assert f"fix in KubeVirt (prod_vxc-kv): {KUBECTL.replace('web-01', 'vxc-kv')}" in err
    assert re.search(r"prod_vxc-kv +STACK +KubeVirt: a change made in libvirt does not last", out)
    assert cli.main(args + ["--format", "prometheus"]) == EXIT_WORK_FOUND
    text = capsys.readouterr().out
    assert re.search(r'virtxml_cpu_domain_managed\{[^}]*domain="prod_vxc-kv"[^}]*orchestrator="KubeVirt",knob="[^"]+'
                     r'"\} 1', text)
    assert re.search(r'virtxml_cpu_domain_fixable\{[^}]*domain="vxc-stack-plain"[^}]*\} 1', text)
    assert re.search(r'virtxml_cpu_domain_fixable\{[^}]*domain="prod_vxc-kv"[^}]*\} 0', text)


# --- the hook --------------------------------------------------------------------------------------------

def _config(tmp_path, mode: str, config_dir) -> str:
    p = tmp_path / "hook.toml"
    p.write_text(f'[hook]\nmode = "{mode}"\nspool = "{tmp_path / "spool"}"\nlibvirt_config_dir = "{config_dir}"\n')
    return str(p)


def _hook(tmp_path, mode, data, name="scratch", config_dir=None):
    log = Capture()
    config_dir = tmp_path / "qemu" if config_dir is None else config_dir
    rc = evaluate.run([name, "prepare", "begin", "-"], config_path=_config(tmp_path, mode, config_dir),
                      stdin=io.BytesIO(data), log=log)
    return rc, log.lines


@pytest.fixture
def defined(tmp_path):
    """libvirt's config directory with a persistent definition of each name given."""
    def make(*names):
        d = tmp_path / "qemu"
        d.mkdir(exist_ok=True)
        for n in names:
            (d / f"{n}.xml").write_bytes(b"<domain/>")
        return d
    return make


@pytest.mark.parametrize("fixture", sorted(SHAPED))
@pytest.mark.parametrize("mode", ["enforce", "queue"])
def test_the_hook_lets_a_managed_guest_start_with_its_knob_and_queues_nothing(tmp_path, defined, fixture, mode):
    data = (FIXTURES / fixture).read_bytes()
    name = facts(data).name
    defined(name)  # persistent too: managed decides
    rc, lines = _hook(tmp_path, mode, data, name)
    assert rc == 0 and len(lines) == 1
    who = SHAPED[fixture]
    assert "decision=managed" in lines[0] and ("stack=" + (f'"{who}"' if " " in who else who)) in lines[0]
    assert "edits_last=no" in lines[0] and "knob=" in lines[0] and "result=refused" not in lines[0]
    assert not (tmp_path / "spool").exists() or not list((tmp_path / "spool").iterdir())


@pytest.mark.parametrize("mode", ["enforce", "queue"])
def test_the_hook_lets_a_transient_guest_start_and_refuses_or_queues_a_persistent_one(tmp_path, defined, mode,
                                                                                      capsys):
    defined("other")
    rc, lines = _hook(tmp_path, mode, PLAIN)  # no scratch.xml: virsh create
    assert rc == 0 and "decision=transient" in lines[0] and "queued=" not in lines[0]
    assert not (tmp_path / "spool").exists() or not list((tmp_path / "spool").iterdir())
    defined("scratch")
    rc, lines = _hook(tmp_path, mode, PLAIN)
    if mode == "enforce":
        assert rc == 1 and "result=refused" in lines[0] and "refusing to start 'scratch'" in capsys.readouterr().err
    else:
        assert rc == 0 and "decision=inject" in lines[0] and list((tmp_path / "spool").iterdir())


def test_audit_mode_logs_the_stack_and_changes_nothing(tmp_path, defined):
    defined()
    rc, lines = _hook(tmp_path, "audit", (FIXTURES / "stack-kubevirt.xml").read_bytes(), "prod_web-01")
    assert rc == 0 and "decision=inject" in lines[0] and "stack=KubeVirt" in lines[0] and "knob=" in lines[0]


@pytest.mark.parametrize("config_dir", ["", "MISSING", "LINK"])
def test_when_the_hook_cannot_tell_it_refuses_as_before(tmp_path, defined, config_dir, capsys):
    if config_dir == "MISSING":
        config_dir = tmp_path / "nowhere"
    elif config_dir == "LINK":
        os.symlink(defined(), tmp_path / "link")
        config_dir = tmp_path / "link"
    rc, lines = _hook(tmp_path, "enforce", PLAIN, config_dir=config_dir)
    assert rc == 1 and "result=refused" in lines[0]


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../qemu/scratch", "x\0y", "n" * 252])
def test_a_name_libvirt_could_not_have_written_cannot_be_told(tmp_path, defined, name):
    d = defined("scratch")
    assert persistent.has_definition(name, str(d)) is None


def test_only_a_regular_file_is_a_definition_and_no_link_is_followed(tmp_path, defined):
    d = defined("vm")
    assert persistent.has_definition("vm", str(d)) is True
    assert persistent.has_definition("gone", str(d)) is False
    os.symlink(d / "vm.xml", d / "linked.xml")
    os.mkdir(d / "dir.xml")
    os.mkfifo(d / "fifo.xml")
    for name in ("linked", "dir", "fifo"):
        assert persistent.has_definition(name, str(d)) is None, name
    assert persistent.has_definition("vm", str(d / "vm.xml")) is None  # not a directory
    assert persistent.has_definition("n" * 251, str(d)) is False  # the longest name libvirt can keep a file for


def test_watch_leaves_a_managed_guest_it_sees_defined(stack_driver):
    """watch over the test driver: a KubeVirt-shaped domain defined while it runs is reported managed and
    never redefined; a plain one defined after it is fixed (so watch did look)."""
    import time

    conn, _ = stack_driver
    doms = []
    with watching() as logged:
        deadline = time.monotonic() + 10
        kv = conn.defineXML(_domain("ns_vxc-watched-kv", KV_META))
        doms.append(kv)
        before = kv.XMLDesc(2)
        plain = conn.defineXML(_domain("vxc-watched-plain"))
        doms.append(plain)
        while "pvspinlock" not in plain.XMLDesc(2) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
    try:
        assert "pvspinlock" in plain.XMLDesc(2) and kv.XMLDesc(2) == before
        mine = [m for m, _w in logged if m.startswith("ns_vxc-watched-kv: ") and ": note: " not in m]
        assert mine and all(m.startswith("ns_vxc-watched-kv: managed: not redefined: KubeVirt") for m in mine), logged
    finally:
        for d in doms:
            d.undefine()


@pytest.mark.parametrize("metadata,who,says,knob", [
    ("<nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'><nova:name>x</nova:name>"
     "</nova:instance>", "OpenStack Nova", "hard reboot", "cpu_mode = host-passthrough"),
    ("<ovirt-vm:vm xmlns:ovirt-vm='http://ovirt.org/vm/1.0'><ovirt-vm:clusterVersion>4.7</ovirt-vm:clusterVersion>"
     "</ovirt-vm:vm>", "oVirt/VDSM", "VDSM", "Pass-Through Host CPU"),
    ("<kubevirt xmlns='http://kubevirt.io'><uid>1</uid></kubevirt>", "KubeVirt", "virt-launcher",
     "spec.template.spec.domain.features.pvspinlock: {}"),
])
def test_orchestrator_managed_domains_are_recognised_and_explained(metadata, who, says, knob):
    data = (FIXTURES / "handwritten-no-cpu.xml").read_bytes().replace(
        b"</domain>", f"<metadata>{metadata}</metadata></domain>".encode())
    o = process(data, "m.xml", UP, Config(), render=False)
    assert o.resolution.facts.orchestrator == who
    assert any(n.startswith(f"managed by {who}") and says in n for n in o.decision.notes)
    logged = []
    evaluate.run(["vm", "prepare", "begin", "-"], mode="audit", config_path=None,
                 stdin=__import__("io").BytesIO(data), log=lambda m, **kw: logged.append(m))
    assert (f'stack="{who}"' in logged[0] or f"stack={who}" in logged[0]) and "edits_last=no" in logged[0]
    assert knob in logged[0].split(" knob=", 1)[1]


def test_unmanaged_domain_has_no_orchestrator():
    o = process((ROOT / "examples" / "fedora-host-model.xml").read_bytes(), "f.xml", UP, Config(), render=False)
    assert o.resolution.facts.orchestrator is None

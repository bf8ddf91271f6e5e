"""What the Cockpit page (cockpit/) reads from the command: explain of libvirt domains, hook status as
JSON, and the page's files as Cockpit and the Debian package need them. Uses libvirt's test driver (no
daemon); the page itself runs in tests/test_lab_cockpit.py."""

from __future__ import annotations

import json
import re

import pytest

from virtxml_cpu import cli, hookinstall

from .conftest import ROOT

COCKPIT = ROOT / "cockpit"
NODE = """<node>
<domain type='kvm'><name>web</name><memory unit='MiB'>64</memory><vcpu>2</vcpu>
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os><cpu mode='host-model'/></domain>
<domain type='kvm'><name>db</name><memory unit='MiB'>64</memory><vcpu>2</vcpu>
  <os><type arch='x86_64' machine='pc-i440fx-7.2'>hvm</type></os><features><pvspinlock state='on'/></features></domain>
</node>
"""


@pytest.fixture
def node(tmp_path):
    pytest.importorskip("libvirt")
    path = tmp_path / "node.xml"
    path.write_text(NODE)
    return f"test://{path}"


def lines(capsys) -> tuple[list[dict], str]:
    out = capsys.readouterr()
    return [json.loads(line) for line in out.out.splitlines() if line.strip()], out.err


def test_explain_all_domains_says_what_audit_says(node, capsys):
    assert cli.main(["audit", "--connect", node, "--no-host-probe", "--format", "json"]) == 1
    audit = {r["domain"]: r for r in lines(capsys)[0] if r["record"] == "domain"}
    assert cli.main(["explain", "--connect", node, "--no-host-probe", "--all-domains", "--format", "json"]) == 0
    explained = {r["domain"]: r for r in lines(capsys)[0]}
    assert set(explained) == set(audit) == {"web", "db"}
    for name, x in explained.items():
        assert x["decision"]["action"] == audit[name]["decision"]["action"]
        assert x["decision"]["reason"] == audit[name]["decision"]["reason"]
        assert x["features"]["kvm-pv-unhalt"]["state"] == audit[name]["pv_unhalt"]
    assert explained["web"]["machine"] == "pc-q35-7.2" and explained["web"]["cpu_mode"] == "host-model"
    assert audit["web"]["needs_fix"] and not audit["db"]["needs_fix"]


def test_explain_named_domains_and_unknown_names(node, capsys):
    assert cli.main(["explain", "--connect", node, "--no-host-probe", "--domain", "db", "--format", "json"]) == 0
    records, _ = lines(capsys)
    assert [r["domain"] for r in records] == ["db"] and records[0]["machine"] == "pc-i440fx-7.2"
    assert cli.main(["explain", "--connect", node, "--no-host-probe", "--domain", "nope", "--domain", "web"]) == 2
    out = capsys.readouterr()
    assert out.err.splitlines() == ["virtxml-cpu: nope: Domain not found"] and "== web" in out.out
    assert cli.main(["explain", "--connect", node, "--domain", "web", "some.xml"]) == 2
    assert "not both" in capsys.readouterr().err


def test_explain_domains_of_an_unreachable_libvirt_is_one_line(tmp_path, capsys):
    pytest.importorskip("libvirt")
    uri = f"qemu:///system?socket={tmp_path}/none"
    assert cli.main(["explain", "--connect", uri, "--all-domains", "--format", "json"]) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"virtxml-cpu: cannot connect to {uri}"), err


def test_hook_status_json_is_the_text_status_as_data(tmp_path, capsys):
    hooks = tmp_path / "hooks"
    (hooks / "qemu.d").mkdir(parents=True)
    assert cli.main(["hook", "status", "--hooks-dir", str(hooks), "--format", "json"]) == 1
    rec = json.loads(capsys.readouterr().out)
    assert rec["installed"] is False and rec["hooks"] == [] and rec["hooks_dir"] == str(hooks)
    assert set(rec) == {"libvirt", "hooks_dir", "installed", "trusted", "hooks", "qemu"}
    hookinstall.install(str(hooks), "queue", None, False)
    code = cli.main(["hook", "status", "--hooks-dir", str(hooks), "--format", "json"])
    rec = json.loads(capsys.readouterr().out)
    assert code == (0 if rec["trusted"] else 1) and rec["trusted"] == (not rec["hooks"][0]["problems"])
    [hook] = rec["hooks"]
    assert rec["installed"] and hook["ours"] and hook["mode"] == "queue" and hook["path"].endswith("qemu.d/virtxml-cpu")
    trusted, text = hookinstall.status(str(hooks))
    assert trusted == rec["trusted"] and f"{hook['path']}: installed, mode queue" in text[1]
    (hooks / "qemu").write_text("#!/bin/sh\nexit 0\n")
    rec = hookinstall.status_record(str(hooks))
    assert [h["ours"] for h in rec["hooks"]] == [True, False]
    assert f"{hooks}/qemu: present, not ours" in hookinstall.status(str(hooks))[1]


def page_commands() -> list[list[str]]:
    """Every virtxml-cpu command line index.js runs: `[CMD, "verb", ...]` literals."""
    js = (COCKPIT / "index.js").read_text()
    found = re.findall(r"\[CMD((?:,\s*\"[^\"]*\")+)\]", js)
    return [re.findall(r"\"([^\"]*)\"", args) for args in found]


def test_every_command_the_page_runs_is_one_this_cli_accepts():
    commands = page_commands()
    verbs = {c[0] for c in commands}
    assert {"audit", "explain", "hook", "apply", "verify"} <= verbs, commands
    parser = cli.build_parser()
    for argv in commands:
        args = parser.parse_args(argv + (["web"] if argv[0] == "apply" else []))
        assert args.command == argv[0]
    assert ["audit", "--format", "json"] in commands and ["verify", "--json", "-"] in commands


def test_page_files_are_what_cockpit_and_the_package_need():
    html = (COCKPIT / "index.html").read_text()
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
    assert scripts and all('src="' in attrs and not body.strip() for attrs, body in scripts), "inline script"
    assert '<script src="../base1/cockpit.js"></script>' in html
    assert not re.search(r"\son\w+=", html), "inline event handler (Cockpit's CSP blocks it)"
    manifest = json.loads((COCKPIT / "manifest.json").read_text())
    assert manifest["menu"]["index"]["label"]
    for ref in re.findall(r'(?:src|href)="([^"]+)"', html):
        assert ref.startswith("../base1/") or (COCKPIT / ref).is_file(), ref
    installed = {line.split()[0] for line in (ROOT / "debian" / "cockpit-virtxml-cpu.install").read_text().splitlines()}
    assert installed == {f"cockpit/{p.name}" for p in COCKPIT.iterdir()}

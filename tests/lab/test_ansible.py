"""The Ansible role on this machine (ansible_connection=local): installs the built wheel into a venv, the
hook into a temporary hooks directory, runs the audit against the real libvirtd and gathers it on the
controller; a second run reports changed=0."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lab import harness
from virtxml_cpu.hook import install

from tests.support import ROOT, require_lab

libvirt = require_lab()
pytestmark = pytest.mark.lab
PLAYBOOK = ROOT / "contrib" / "ansible" / "site.yml"


def wheel(tmp: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp), str(ROOT)]
    if subprocess.run(cmd + ["--no-build-isolation"], capture_output=True).returncode:
        subprocess.run(cmd, check=True, capture_output=True)
    (whl,) = tmp.glob("virtxml_cpu-*.whl")
    return whl


def play(tmp: Path, extra: dict) -> subprocess.CompletedProcess:
    inventory = tmp / "inventory.ini"
    inventory.write_text(f"[libvirt_hosts]\nlocalhost ansible_connection=local "
                         f"ansible_python_interpreter={sys.executable}\n")
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0",
               ANSIBLE_LOCAL_TEMP=str(tmp / "ansible-tmp"), ANSIBLE_HOME=str(tmp / "ansible-home"))
    r = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                        str(PLAYBOOK), "-e", json.dumps(extra)], capture_output=True, text=True, env=env,
                       timeout=900, cwd=tmp)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    return r


def recap(out: str) -> dict[str, int]:
    m = re.search(r"localhost\s*:\s*(.*)", out.split("PLAY RECAP", 1)[1])
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))}


def test_role_installs_hooks_audits_and_is_idempotent(lab, tmp_path, unshared):
    dom = lab.defineXML(harness.startable(harness.boot_sector_guest(harness.unique_name("ansible"), "pc-q35-7.2",
                                                                   "<cpu mode='host-model'/>")).decode())
    try:
        extra = {
            "virtxml_cpu_venv": str(unshared / "venv"),  # outside /tmp: hook install takes no interpreter there
            "virtxml_cpu_python": sys.executable,
            "virtxml_cpu_package": f"{wheel(tmp_path)}[libvirt]",
            "virtxml_cpu_hooks_dir": str(tmp_path / "hooks"),
            "virtxml_cpu_hook_mode": "queue",
            "virtxml_cpu_config": str(tmp_path / "etc" / "config.toml"),
            "virtxml_cpu_config_content": f'[hook]\nspool = "{tmp_path}/spool/pending"\n',
            "virtxml_cpu_libvirtd_reload": f"touch {tmp_path}/reloaded",
            "virtxml_cpu_results_dir": str(tmp_path / "results"),
        }
        first = play(tmp_path, extra)
        assert recap(first.stdout)["changed"] >= 4 and (tmp_path / "reloaded").exists()  # venv, pip, config, hook
        hook = tmp_path / "hooks" / "qemu.d" / "virtxml-cpu"
        text = hook.read_text()
        settings = install.installed_settings(text)
        assert os.access(hook, os.X_OK) and text.startswith("#!/bin/sh\n")
        assert settings["PYTHON"].startswith(f"{unshared}/venv/bin/python"), settings
        assert settings["MODE"] == "queue" and settings["CONFIG"] == str(tmp_path / "etc" / "config.toml")
        rows = [json.loads(line) for line in (tmp_path / "results" / "localhost.jsonl").read_text().splitlines()]
        mine = [r for r in rows if r["record"] == "domain" and r["domain"] == dom.name()]
        assert mine and mine[0]["host"] == "qemu:///system" and mine[0]["needs_fix"] is True
        (tmp_path / "reloaded").unlink()
        second = play(tmp_path, extra)
        assert recap(second.stdout)["changed"] == 0, second.stdout[-3000:]
        assert not (tmp_path / "reloaded").exists()  # the hook did not change: no reload
        print(f"\nansible: first run {recap(first.stdout)}, second run {recap(second.stdout)}")
    finally:
        dom.undefine()

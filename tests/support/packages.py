"""What the package tests share: the .deb's entries, paths mapped by rules, and a scriptlet run as its package
manager runs it, with a stand-in systemctl that answers as a host of each kind would."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

TEXTFILE = "/var/lib/prometheus/node-exporter/virtxml-cpu.prom"


def deb_entries(deb: Path) -> dict[str, tuple[str, str]]:
    out = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    entries = {}
    for line in out.splitlines():
        mode, _owner, _size, _date, _time, rest = line.split(None, 5)
        path, _, link = rest.partition(" -> ")
        entries["/" + path.lstrip("./").rstrip("/")] = (mode, link)
    entries.pop("/", None)
    return entries


def mapped(deb: dict[str, tuple[str, str]], rules) -> dict[str, tuple[str, str]]:
    """The .deb's entries at the places `rules` (pattern, replacement or None) give them."""
    out = {}
    for path, entry in deb.items():
        for pattern, replacement in rules:
            if re.fullmatch(pattern, path):
                if replacement is not None:
                    out[re.sub(pattern, replacement, path)] = entry
                break
    return out


def run_scriptlet(tmp: Path, body: str, arg: int, active: set[str], shell: str, systemctl: bool = True,
                  reload_fails: bool = False) -> tuple[int, list[str]]:
    """`shell FILE arg` as rpm runs it, with only a stand-in systemctl (and rm) on PATH; (status, calls)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp / "calls"
    calls.write_text("")
    (bin_dir / "rm").unlink(missing_ok=True)
    (bin_dir / "rm").symlink_to(shutil.which("rm"))
    stand_in = bin_dir / "systemctl"
    stand_in.unlink(missing_ok=True)
    if systemctl:
        stand_in.write_text(f"""#!/bin/sh
echo "$*" >> {calls}
case "$1" in
is-active) for unit; do :; done
           case " {' '.join(sorted(active))} " in *" $unit "*) exit 0 ;; esac
           exit 3 ;;
reload) exit {1 if reload_fails else 0} ;;
esac
exit 1
""")
        stand_in.chmod(0o755)
    script = tmp / "scriptlet"
    script.write_text(body)
    r = subprocess.run([shell, str(script), str(arg)], env={"PATH": str(bin_dir)}, capture_output=True, text=True,
                       timeout=30)
    assert r.stderr == "", r.stderr
    return r.returncode, calls.read_text().splitlines()


ASK_BOTH = ["is-active --quiet virtqemud.service", "is-active --quiet libvirtd.service"]
POST_CASES = [  # (active units, the calls the scriptlet makes)
    pytest.param({"virtqemud.service", "virtqemud.socket"},
                 ["is-active --quiet virtqemud.service", "reload virtqemud.service"], id="virtqemud-runs"),
    pytest.param({"libvirtd.service", "libvirtd.socket"}, ASK_BOTH + ["reload libvirtd.service"], id="libvirtd-runs"),
    pytest.param({"virtqemud.service", "libvirtd.service"},
                 ["is-active --quiet virtqemud.service", "reload virtqemud.service"], id="both-run"),
    # socket-activated and idle: it reads the hook when it next starts
    pytest.param({"virtqemud.socket"}, ASK_BOTH, id="virtqemud-idle"),
    pytest.param(set(), ASK_BOTH, id="neither-runs"),  # nothing to do
]

"""`virtxml-cpu hook status`: the hooks installed under a hooks directory, whether each is ours and what it
runs and reads is still root's alone (hook/trust.py), as data (`--format json`, with the local QEMU build
and its last verify pass) and as the lines a person reads."""

from __future__ import annotations

import os
from pathlib import Path

from ..constants import CONFIG_PATH
from ..errors import shown
from ..fs.trusted import resolve_trusted
from ..host import daemons
from .install import DEFAULT_HOOKS_DIR, MARKER, installed_settings, libvirt_version, mode_shown
from .trust import PACKAGE_PARENT, allowed_owners, file_problem, untrusted_code


def status_record(hooks_dir: str) -> dict:
    """What `hook status` finds, as data (`--format json` prints it; the text lines are made from it)."""
    v = libvirt_version()
    daemon = daemons.qemu_daemon()
    hooks = []
    for path in (Path(hooks_dir) / "qemu.d" / "virtxml-cpu", Path(hooks_dir) / "qemu"):
        if not path.exists():
            continue
        text = path.read_text(errors="replace")
        if MARKER not in text:
            hooks.append({"path": str(path), "ours": False, "mode": None, "config": None, "interpreter": None,
                          "interpreter_ok": None, "problems": []})
            continue
        settings = installed_settings(text)
        python = settings.get("PYTHON", "")
        hooks.append({"path": str(path), "ours": True, "mode": settings.get("MODE") or None,
                      "config": settings.get("CONFIG") or None, "interpreter": python,
                      "interpreter_ok": bool(python) and os.access(python, os.X_OK) and os.access(path, os.X_OK),
                      "problems": installed_problems(path, python, settings)})
    ours = [h for h in hooks if h["ours"]]
    return {"libvirt": ".".join(map(str, v)) if v else None,
            "daemon": {"name": daemon.name, "state": daemon.state, "systemd": daemon.systemd},
            "hooks_dir": hooks_dir, "installed": bool(ours),
            "trusted": bool(ours) and not any(h["problems"] for h in ours), "hooks": hooks}


def status(hooks_dir: str) -> tuple[bool, list[str]]:
    """The text `hook status` prints; True when our hook is installed and trusted."""
    rec = status_record(hooks_dir)
    daemon = daemons.QemuDaemon(rec["daemon"]["name"], rec["daemon"]["state"], rec["daemon"]["systemd"])
    lines = [f"libvirt {rec['libvirt'] or 'not found'} ({daemons.describe(daemon)}); hooks directory {hooks_dir}"]
    for h in rec["hooks"]:
        if not h["ours"]:
            lines.append(f"{h['path']}: present, not ours")
            continue
        lines.append(f"{h['path']}: installed, mode {mode_shown(h['mode'])}, config {h['config']!r}, "
                     f"interpreter {h['interpreter']} {'ok' if h['interpreter_ok'] else 'MISSING or not executable'}")
        lines += [f"{h['path']}: UNTRUSTED: {p}" for p in h["problems"]] or [
            f"{h['path']}: trusted: only root can change what it runs and reads"]
    if not rec["installed"]:
        lines.append("virtxml-cpu hook: not installed")
    return rec["trusted"], lines


def status_json(hooks_dir: str = DEFAULT_HOOKS_DIR) -> dict:
    """`hook status --format json`: the hook as status_record finds it, and the local QEMU with its last
    verify pass."""
    from ..verify.record import local_binary, read_record, record_key

    rec = status_record(hooks_dir)
    binary = local_binary()
    rec["qemu"] = None if binary is None else {
        "emulator": binary[0], "version": binary[1], "package": binary[2],
        "verified": read_record().get(record_key(*binary))}
    return rec


def installed_problems(path: Path, python: str, settings: dict[str, str]) -> list[str]:
    """What `hook install` would refuse about an installed hook: the script itself, its interpreter, the
    code it imports and the config it reads (the same checks, on what the script names: installed_settings)."""
    owners = allowed_owners()
    out = []
    real, why = resolve_trusted(str(path), owners)
    why = why or file_problem(real, owners)
    if why:
        out.append(f"the script: {why}")
    if not python:
        return out + ["its settings cannot be read"]
    package_dir = settings.get("PACKAGE_DIR") or PACKAGE_PARENT
    lib = tuple(d for d in settings.get("LIB_DIRS", "").split("\n") if d)
    config = settings.get("CONFIG") or None
    why = untrusted_code(python, package_dir, lib)
    if why:
        out.append(why)
    from ..core import config as config_file

    config = config or CONFIG_PATH
    why = config_file.trust_problem(config)
    if why:
        out.append(f"config {shown(config)}: {why}")
    return out

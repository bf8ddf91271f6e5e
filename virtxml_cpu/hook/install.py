"""`virtxml-cpu hook install|uninstall|status`: put the qemu hook where libvirt looks, and only there.

Installs into DIR/qemu.d/virtxml-cpu (libvirt >= 6.5 runs every script there, in order) or, on older
libvirt, into DIR/qemu when that is free. Never overwrites a script it did not write.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from importlib import resources
from pathlib import Path

from ..constants import CONFIG_PATH, DIGEST_DIR as DEFAULT_DIGEST_DIR, HOOK_OPS
from ..errors import BadInput, EnvironmentProblem, shown
from ..fs.files import write_output
from ..host import daemons
from ..host.local_qemu import run, run_trusted, which
from ..fs.trusted import check_ancestors, check_trusted, check_tree, read_regular, resolve_trusted
from ..tables.version import AS_CURRENT, Version, in_window, is_release, parse_version
from .import_guard import Checker

DEFAULT_HOOKS_DIR = "/etc/libvirt/hooks"
MARKER = "# managed by `virtxml-cpu hook install`; `virtxml-cpu hook uninstall` removes it"
PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent.parent)  # the directory the hook puts on sys.path
QEMU_D_SINCE = (6, 5, 0)


def libvirt_version() -> Version | None:
    """The local libvirt's version from `virtqemud --version` (or libvirtd's), run only as a trusted
    binary is (local_qemu.run_trusted: root-owned, nobody else may write it, unprivileged)."""
    for name in daemons.DAEMONS:
        path = which(name) or which(name, "/usr/sbin:/sbin")
        out = run_trusted(path, "--version") if path else None
        found = [word for word in (out or "").split() if is_release(word)]  # "virtqemud (libvirt) 9.0.0"
        if found:
            return parse_version(found[0])
    return None


def template() -> str:
    """The hook's shell front, shipped as package data (wheel, sdist and source tree alike)."""
    return resources.files("virtxml_cpu").joinpath("hook", "qemu-hook").read_text(encoding="utf-8")


def lib_dirs(package_dir: str = PACKAGE_PARENT) -> tuple[str, ...]:
    """Where this interpreter finds lxml, when not beside the package (a venv with an editable install):
    the hook imports from there without processing every .pth file of the environment."""
    spec = importlib.util.find_spec("lxml")
    if spec is None or not spec.origin:
        return ()
    where = os.path.dirname(os.path.dirname(os.path.realpath(spec.origin)))
    return () if where == os.path.realpath(package_dir) else (where,)


SETTINGS = ("PYTHON", "PACKAGE_DIR", "LIB_DIRS", "MODE", "CONFIG", "DIGEST_DIR")


def render(template: str, python: str, package_dir: str, mode: str | None, config: str | None,
           lib: tuple[str, ...] = (), digest_dir: str | None = DEFAULT_DIGEST_DIR) -> str:
    """The installed script: the POSIX shell front with our interpreter (run -I -S), the package and lxml
    locations and the settings filled in, each shell-quoted. A value holding a newline or NUL is
    refused (LIB_DIRS is one directory a line)."""
    values = {"PYTHON": python, "PACKAGE_DIR": package_dir, "LIB_DIRS": "\n".join(lib), "MODE": mode or "",
              "CONFIG": config or "", "DIGEST_DIR": digest_dir or ""}
    for name, value in values.items():
        if "\0" in value or (name != "LIB_DIRS" and "\n" in value) or any("\n" in d or not d for d in lib):
            raise BadInput(f"cannot render the hook: {name} {value!r} holds a newline or NUL")
    out = template.replace("@CONFIG_PATH@", CONFIG_PATH).replace("@DIGEST_DIR@", DEFAULT_DIGEST_DIR)
    ops = "|".join(f'"{op} {sub}"' for op, sub in HOOK_OPS)
    out = re.sub(r"^\*\) ;;  # HOOK_OPS: .*$", lambda _: f"{ops}) ;;", out, count=1, flags=re.M)
    for name, value in values.items():
        quoted = "'" + value.replace("'", "'\\''") + "'"
        out = re.sub(rf"^{name}='[^'\n]*'(.*)$", lambda m, n=name, q=quoted: f"{n}={q}{m.group(1)}", out,
                     count=1, flags=re.M)
    first, _, rest = out.partition("\n")
    return f"{first}\n{MARKER}\n{rest}"


def installed_settings(text: str) -> dict[str, str]:
    """The settings of a rendered hook (SETTINGS as the front assigns them, unquoted)."""
    import shlex

    out = {}
    for name, value in re.findall(rf"^({'|'.join(SETTINGS)})=('(?:[^']|'\\'')*')", text, flags=re.M):
        try:
            out[name] = shlex.split(value)[0] if value != "''" else ""
        except (ValueError, IndexError):
            out[name] = value
    return out


def is_ours(path: Path) -> bool:
    try:
        return MARKER in path.read_text(errors="replace")
    except OSError:
        return False


def target(hooks_dir: str, legacy: bool | None = None) -> Path:
    if legacy is None:
        v = libvirt_version()
        legacy = not in_window(v, QEMU_D_SINCE, None, unknown=AS_CURRENT)
    return Path(hooks_dir) / "qemu" if legacy else Path(hooks_dir) / "qemu.d" / "virtxml-cpu"


def untrusted_code(python: str | None = None, package_dir: str = PACKAGE_PARENT,
                   lib: tuple[str, ...] | None = None) -> str | None:
    """Why the code the hook would run is not ours alone, or None. libvirtd runs the hook as root at
    every guest start: everything it runs must be root's (or, for a hook installed by another user, that
    user's) and nobody else's to change, or a checkout or venv in someone's home hands them root:
    - the interpreter the shebang names, literally: every directory it is looked up in (a venv's bin/,
      which holds the link) and every link on the way to the binary, and the binary;
    - the pyvenv.cfg beside it (Python reads it even with -I -S) and the home it names, where the
      standard library is found;
    - the directories on the isolated interpreter's sys.path (the standard library, lib-dynload),
      the package and lxml trees, symbolic links inside them followed and checked;
    - everything in the package and lib directories the hook puts on sys.path: its interpreter may look up
      any name there (lxml's optional rnc2rng, copy.py's org, ...), and the front checks whatever it finds
      there by the same rule (import_guard) at every start."""
    python = python or sys.executable
    lib = lib_dirs(package_dir) if lib is None else lib
    owners = tuple(sorted({0, os.geteuid()}))
    why = _interpreter_problem(python, owners)
    if why:
        return f"the interpreter {python}: {why}"
    dirs, why = _isolated_path(python)
    if why:
        return f"the interpreter {python}: {why}"
    for directory in dirs:
        why = check_tree(directory, owners) if os.path.isdir(directory) else check_ancestors(directory, owners)
        if why:
            return f"the standard library ({directory}): {why}"
    lxml_dir = next((os.path.join(d, "lxml") for d in (package_dir, *lib) if os.path.isdir(os.path.join(d, "lxml"))),
                    None)
    for what, why in (("virtxml_cpu", check_tree(os.path.join(package_dir, "virtxml_cpu"), owners)),
                      ("lxml", check_tree(lxml_dir, owners) if lxml_dir else "not found where the hook looks"),
                      ("the hook's import path", _import_path_problem((package_dir, *lib), owners))):
        if why:
            return f"{what}: {why}"
    return None


def _interpreter_problem(python: str, owners: tuple[int, ...]) -> str | None:
    real, why = resolve_trusted(python, owners)
    if why:
        return why
    why = _file_problem(real, owners)
    if why:
        return why
    here = os.path.dirname(os.path.abspath(python))
    for cfg in (os.path.join(here, "pyvenv.cfg"), os.path.join(os.path.dirname(here), "pyvenv.cfg")):
        if not os.path.lexists(cfg):
            continue  # its directory is checked above: nobody else can create one there
        real, why = resolve_trusted(cfg, owners)
        why = why or _file_problem(real, owners)
        if why:
            return f"{cfg}: {why}"
        try:
            text = read_regular(real, 64 * 1024)[0].decode("utf-8", "replace")
        except OSError as e:
            return f"{cfg}: {e.strerror or e}"
        for key, value in re.findall(r"^\s*(home|executable)\s*=\s*(.*?)\s*$", text, flags=re.M):
            why = check_ancestors(os.path.join(value, "x"), owners) if key == "home" else \
                _interpreter_file(value, owners)
            if why:
                return f"{cfg} names {key} = {value}: {why}"
        return None  # Python reads the first pyvenv.cfg it finds
    return None


def _interpreter_file(path: str, owners: tuple[int, ...]) -> str | None:
    real, why = resolve_trusted(path, owners)
    return why or _file_problem(real, owners)


def _isolated_path(python: str) -> tuple[list[str], str | None]:
    """sys.path of `python -I -S` (the standard library's directories), asked of the interpreter once
    it is known to be root's alone (local_qemu.run; as root, since root runs it as the hook anyway)."""
    import json

    out, why = run(python, "-I", "-S", "-c", "import sys, json; print(json.dumps(sys.path))", timeout=30,
                   as_root=True)
    try:
        return [p for p in json.loads(out) if p], None
    except (TypeError, ValueError) as e:  # TypeError: not run (out is None)
        return [], f"cannot ask it for its module path ({why or e})"


def _import_path_problem(dirs: tuple[str, ...], owners: tuple[int, ...]) -> str | None:
    """Why something in a directory the hook adds to sys.path (the package's, lxml's) is not the owners'
    alone: the way to each, then every entry below them by import_guard's rule, the one the front applies
    to each module it finds there. Every entry, not a list of names: the interpreter looks up names nobody
    lists (an optional import, a check for another platform), and a name absent today is looked up all the
    same."""
    for directory in dict.fromkeys(dirs):
        why = check_ancestors(os.path.join(directory, "x"), owners)
        if why:
            return why
    why = Checker(dirs, owners).tree_problem()
    return shown(why) if why else None  # a link's target is named as its owner chose


def _file_problem(path: str, owners: tuple[int, ...]) -> str | None:
    try:
        problem = check_trusted(os.stat(path), owners)
    except OSError as e:
        return f"{path}: {e.strerror}"
    return f"{path} {problem}" if problem else None


def install(hooks_dir: str, mode: str | None, config: str | None, legacy: bool | None = None,
            digest_dir: str | None = DEFAULT_DIGEST_DIR) -> list[str]:
    python, package_dir, lib = sys.executable, PACKAGE_PARENT, lib_dirs()  # found once: what is checked is rendered
    why = untrusted_code(python, package_dir, lib)
    if why:
        raise BadInput(f"not installing a hook libvirtd would run as root: {why}; install virtxml-cpu where only "
                       "root can change it (the .deb, or a root-owned venv such as /opt/virtxml-cpu)")
    path = target(hooks_dir, legacy)
    _real, why = resolve_trusted(str(path), tuple(sorted({0, os.geteuid()})), missing_ok=True)
    if why:  # libvirtd runs whatever is there as root: a hooks directory others can change is theirs
        raise BadInput(f"not installing into {shown(str(path.parent))}: {why}")
    if path.exists() and not is_ours(path):
        how = ("libvirt >= 6.5 runs every script in qemu.d/: upgrade and use that, or call "
               f"'{path.parent}/qemu.d/virtxml-cpu \"$@\"' from your own {path.name} script")
        raise BadInput(f"{path} exists and was not written by virtxml-cpu; not touching it ({how})")
    if config and not os.path.isabs(config):
        config = os.path.abspath(config)
    if config:
        _check_config(config)
    text = render(template(), python, package_dir, mode, config, lib, digest_dir)
    what = f"mode {mode or 'from config, else audit'}, interpreter {python}"
    try:
        if path.read_text() == text and os.access(path, os.X_OK):
            return [f"unchanged: {path} is installed already ({what})"]
    except (OSError, UnicodeDecodeError):
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EnvironmentProblem(f"{path.parent}: {e.strerror}") from None
    write_output(str(path), text.encode(), [])
    os.chmod(path, 0o755)
    return [f"installed {path} ({what})", daemons.reload_note(daemons.qemu_daemon())]


def _check_config(config: str) -> None:
    """The hook reads its config as root at every guest start: only root may be able to change it, or
    create it where it is missing; one that exists must also parse."""
    from ..core import config as config_file

    why = config_file.trust_problem(config)
    if why:
        raise BadInput(f"not installing a hook that reads config {shown(config)}: {why}")
    if os.path.lexists(config):
        config_file.load(config)


def uninstall(hooks_dir: str) -> list[str]:
    msgs = []
    for path in (Path(hooks_dir) / "qemu.d" / "virtxml-cpu", Path(hooks_dir) / "qemu"):
        if path.exists() and is_ours(path):
            path.unlink()
            msgs.append(f"removed {path}")
        elif path.exists() and path.name == "virtxml-cpu":
            msgs.append(f"left {path}: not written by virtxml-cpu")
    if not msgs:
        msgs.append(f"no virtxml-cpu hook under {hooks_dir}")
    else:
        msgs.append(daemons.reload_note(daemons.qemu_daemon()))
    return msgs


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
        lines.append(f"{h['path']}: installed, mode {h['mode'] or 'from config, else audit'}, config {h['config']!r}, "
                     f"interpreter {h['interpreter']} {'ok' if h['interpreter_ok'] else 'MISSING or not executable'}")
        lines += [f"{h['path']}: UNTRUSTED: {p}" for p in h["problems"]] or [
            f"{h['path']}: trusted: only root can change what it runs and reads"]
    if not rec["installed"]:
        lines.append("virtxml-cpu hook: not installed")
    return rec["trusted"], lines


def installed_problems(path: Path, python: str, settings: dict[str, str]) -> list[str]:
    """What `hook install` would refuse about an installed hook: the script itself, its interpreter, the
    code it imports and the config it reads (the same checks, on what the script names: installed_settings)."""
    owners = tuple(sorted({0, os.geteuid()}))
    out = []
    real, why = resolve_trusted(str(path), owners)
    why = why or _file_problem(real, owners)
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

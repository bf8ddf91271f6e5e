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

from .errors import BadInput, EnvironmentProblem
from .files import write_output
from .localqemu import run_trusted, which
from .safefs import check_ancestors, check_trusted, check_tree

DEFAULT_HOOKS_DIR = "/etc/libvirt/hooks"
MARKER = "# managed by `virtxml-cpu hook install`; `virtxml-cpu hook uninstall` removes it"
PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)  # the directory the hook puts on sys.path
QEMU_D_SINCE = (6, 5, 0)
RESTART_NOTE = ("libvirtd reads hooks when it starts: restart it or send it SIGHUP before the hook is used "
                "(systemctl restart libvirtd, or kill -HUP $(pidof libvirtd))")


def libvirt_version() -> tuple[int, ...] | None:
    """The local libvirt's version from `libvirtd --version` (or virtqemud's), run only as a trusted
    binary is (localqemu.run_trusted: root-owned, nobody else may write it, unprivileged)."""
    for name in ("libvirtd", "virtqemud"):
        path = which(name) or which(name, "/usr/sbin:/sbin")
        out = run_trusted(path, "--version") if path else None
        m = re.search(r"(\d+)\.(\d+)\.(\d+)", out or "")
        if m:
            return tuple(int(x) for x in m.groups())
    return None


def template() -> str:
    """The hook script, shipped as package data (wheel, sdist and source tree alike)."""
    return resources.files("virtxml_cpu").joinpath("data", "qemu-hook").read_text(encoding="utf-8")


def lib_dirs(package_dir: str = PACKAGE_PARENT) -> tuple[str, ...]:
    """Where this interpreter finds lxml, when not beside the package (a venv with an editable install):
    the hook imports from there without processing every .pth file of the environment."""
    spec = importlib.util.find_spec("lxml")
    if spec is None or not spec.origin:
        return ()
    where = os.path.dirname(os.path.dirname(os.path.realpath(spec.origin)))
    return () if where == os.path.realpath(package_dir) else (where,)


def render(template: str, python: str, package_dir: str, mode: str | None, config: str | None,
           lib: tuple[str, ...] = ()) -> str:
    """The installed script: our interpreter with -S, the package location and settings filled in."""
    lines = template.splitlines()
    lines[0] = f"#!{python} -S"
    out = "\n".join(lines) + "\n"
    for name, value in (("PACKAGE_DIR", package_dir), ("LIB_DIRS", tuple(lib) or None), ("MODE", mode),
                        ("CONFIG", config)):
        out = re.sub(rf"^{name} = None(.*)$", lambda m, n=name, v=value: f"{n} = {v!r}{m.group(1)}", out,
                     count=1, flags=re.M)
    return out.replace('"""\nimport sys', f'"""\n{MARKER}\nimport sys', 1)


def is_ours(path: Path) -> bool:
    try:
        return MARKER in path.read_text(errors="replace")
    except OSError:
        return False


def target(hooks_dir: str, legacy: bool | None = None) -> Path:
    if legacy is None:
        v = libvirt_version()
        legacy = v is not None and v < QEMU_D_SINCE
    return Path(hooks_dir) / "qemu" if legacy else Path(hooks_dir) / "qemu.d" / "virtxml-cpu"


def untrusted_code() -> str | None:
    """Why the code the installed hook would run is not ours alone, or None. libvirtd runs the hook as root
    at every guest start: the interpreter, virtxml_cpu and lxml it imports, and every directory above
    them, must be root's (or, for a hook installed by another user, that user's) and nobody else's to
    change; a checkout or venv in someone's home would hand them root."""
    import lxml

    owners = tuple(sorted({0, os.geteuid()}))
    python = os.path.realpath(sys.executable)
    for what, why in (("the interpreter", check_ancestors(python, owners) or _file_problem(python, owners)),
                      ("virtxml_cpu", check_tree(os.path.join(PACKAGE_PARENT, "virtxml_cpu"), owners)),
                      ("lxml", check_tree(os.path.dirname(os.path.realpath(lxml.__file__)), owners))):
        if why:
            return f"{what}: {why}"
    return None


def _file_problem(path: str, owners: tuple[int, ...]) -> str | None:
    try:
        problem = check_trusted(os.stat(path), owners)
    except OSError as e:
        return f"{path}: {e.strerror}"
    return f"{path} {problem}" if problem else None


def install(hooks_dir: str, mode: str | None, config: str | None, legacy: bool | None = None) -> list[str]:
    why = untrusted_code()
    if why:
        raise BadInput(f"not installing a hook libvirtd would run as root: {why}; install virtxml-cpu where only "
                       "root can change it (the .deb, or a root-owned venv such as /opt/virtxml-cpu)")
    path = target(hooks_dir, legacy)
    if path.exists() and not is_ours(path):
        how = ("libvirt >= 6.5 runs every script in qemu.d/: upgrade and use that, or call "
               f"'{path.parent}/qemu.d/virtxml-cpu \"$@\"' from your own {path.name} script")
        raise BadInput(f"{path} exists and was not written by virtxml-cpu; not touching it ({how})")
    if config and not os.path.isabs(config):
        config = os.path.abspath(config)
    text = render(template(), sys.executable, PACKAGE_PARENT, mode, config, lib_dirs())
    what = f"mode {mode or 'from config, else audit'}, interpreter {sys.executable}"
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
    return [f"installed {path} ({what})", RESTART_NOTE]


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
        msgs.append(RESTART_NOTE)
    return msgs


def status(hooks_dir: str) -> tuple[bool, list[str]]:
    v = libvirt_version()
    lines = [f"libvirt {'.'.join(map(str, v)) if v else 'not found'}; hooks directory {hooks_dir}"]
    installed = False
    for path in (Path(hooks_dir) / "qemu.d" / "virtxml-cpu", Path(hooks_dir) / "qemu"):
        if not path.exists():
            continue
        text = path.read_text(errors="replace")
        if MARKER not in text:
            lines.append(f"{path}: present, not ours")
            continue
        installed = True
        python = text.splitlines()[0][2:].split()[0]
        settings = dict(re.findall(r"^(MODE|CONFIG|PACKAGE_DIR) = (.*?)\s+#", text, flags=re.M))
        ok = os.access(python, os.X_OK) and os.access(path, os.X_OK)
        mode = settings.get("MODE", "None")
        mode = "from config, else audit" if mode == "None" else mode.strip("'")
        lines.append(f"{path}: installed, mode {mode}, config {settings.get('CONFIG')}, "
                     f"interpreter {python} {'ok' if ok else 'MISSING or not executable'}")
    if not installed:
        lines.append("virtxml-cpu hook: not installed")
    return installed, lines

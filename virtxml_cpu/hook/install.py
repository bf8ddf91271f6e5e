"""`virtxml-cpu hook install|uninstall|status`: put the qemu hook where libvirt looks, and only there.

Installs into DIR/qemu.d/virtxml-cpu (libvirt >= 6.5 runs every script there, in order) or, on older
libvirt, into DIR/qemu when that is free. Never overwrites a script it did not write.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from ..constants import CONFIG_PATH, DIGEST_DIR, HOOK_OPS
from ..errors import BadInput, EnvironmentProblem, shown
from ..core.precedence import DEFAULT_HOOK_MODE
from ..fs.trusted import resolve_trusted
from ..tables.version import AS_CURRENT, Version, in_window, is_release, parse_version
from .trust import PACKAGE_PARENT, allowed_owners, lib_dirs, untrusted_code

# What runs programs and writes files is imported where it is used: the command imports this module for
# its defaults whatever the verb.

DEFAULT_HOOKS_DIR = "/etc/libvirt/hooks"
MARKER = "# managed by `virtxml-cpu hook install`; `virtxml-cpu hook uninstall` removes it"
QEMU_D_SINCE = (6, 5, 0)
HOOK_MODE = 0o755  # libvirtd runs it; only root may change it


def libvirt_version() -> Version | None:
    """The local libvirt's version from `virtqemud --version` (or libvirtd's), run only as a trusted
    binary is (local_qemu.run_trusted: root-owned, nobody else may write it, unprivileged)."""
    from ..host import daemons
    from ..host.local_qemu import run_trusted, which

    for name in daemons.DAEMONS:
        path = which(name) or which(name, "/usr/sbin:/sbin")
        out = run_trusted(path, "--version") if path else None
        found = [word for word in (out or "").split() if is_release(word)]  # "virtqemud (libvirt) 9.0.0"
        if found:
            return parse_version(found[0])
    return None


def template() -> str:
    """The hook's shell front, shipped as package data (wheel, sdist and source tree alike)."""
    from importlib import resources

    return resources.files("virtxml_cpu").joinpath("hook", "qemu-hook").read_text(encoding="utf-8")


SETTINGS = ("PYTHON", "PACKAGE_DIR", "LIB_DIRS", "MODE", "CONFIG", "DIGEST_DIR")


def render(template: str, python: str, package_dir: str, mode: str | None, config: str | None,
           lib: tuple[str, ...] = (), digest_dir: str | None = DIGEST_DIR) -> str:
    """The installed script: the POSIX shell front with our interpreter (run -I -S), the package and lxml
    locations and the settings filled in, each shell-quoted. A value holding a newline or NUL is
    refused (LIB_DIRS is one directory a line)."""
    values = {"PYTHON": python, "PACKAGE_DIR": package_dir, "LIB_DIRS": "\n".join(lib), "MODE": mode or "",
              "CONFIG": config or "", "DIGEST_DIR": digest_dir or ""}
    for name, value in values.items():
        if "\0" in value or (name != "LIB_DIRS" and "\n" in value) or any("\n" in d or not d for d in lib):
            raise BadInput(f"cannot render the hook: {name} {value!r} holds a newline or NUL")
    out = template.replace("@CONFIG_PATH@", CONFIG_PATH).replace("@DIGEST_DIR@", DIGEST_DIR)
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


def mode_shown(installed: str | None) -> str:
    """The mode written into a hook, as install and status print it; none written: the config's mode, else
    the default (precedence.hook_mode)."""
    return installed or f"from config, else {DEFAULT_HOOK_MODE}"


def install(hooks_dir: str, mode: str | None, config: str | None, legacy: bool | None = None,
            digest_dir: str | None = DIGEST_DIR) -> list[str]:
    python, package_dir, lib = sys.executable, PACKAGE_PARENT, lib_dirs()  # found once: what is checked is rendered
    why = untrusted_code(python, package_dir, lib)
    if why:
        raise BadInput(f"not installing a hook libvirtd would run as root: {why}; install virtxml-cpu where only "
                       "root can change it (the .deb, or a root-owned venv such as /opt/virtxml-cpu)")
    path = target(hooks_dir, legacy)
    _real, why = resolve_trusted(str(path), allowed_owners(), missing_ok=True)
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
    what = f"mode {mode_shown(mode)}, interpreter {python}"
    try:  # the same text, root's (or this user's) and 0755: another owner or mode is written anew
        st = os.stat(path)
        if st.st_uid in allowed_owners() and st.st_mode & 0o7777 == HOOK_MODE and path.read_text() == text:
            return [f"unchanged: {path} is installed already ({what})"]
    except (OSError, UnicodeDecodeError):
        pass
    umask = os.umask(0o022)  # what it makes is 0755 as the hook is, whatever the umask
    try:
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as e:
        raise EnvironmentProblem(f"{path.parent}: {e.strerror}") from None
    finally:
        os.umask(umask)
    _real, why = resolve_trusted(str(path), allowed_owners())  # again: in a sticky directory, what was missing
    if why:  # at the check may have been made by another user before our mkdir
        raise BadInput(f"not installing into {shown(str(path.parent))}: {why}")
    from ..fs.files import write_output
    from ..host import daemons

    write_output(str(path), text.encode(), [], mode=HOOK_MODE, fresh=True)  # root's, whoever owned the old one
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
    from ..host import daemons

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


"""Whether the code a hook would run is root's alone: libvirtd runs the hook as root at every guest start, so
the interpreter, the standard library, the package and lxml, and everything the hook's import path holds must
be root's (or, for a hook installed by another user, that user's) and nobody else's to change. `hook install`
refuses otherwise, and `hook status` reports it of an installed hook; the shell front checks the package and
lib directories again at every start (hook/qemu-hook, `untrusted`) by fs/trusted.py's rule."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

from ..errors import shown
from ..fs.trusted import check_ancestors, check_dir, check_trusted, check_tree, read_regular, resolve_trusted

PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent.parent)  # the directory the hook puts on sys.path


def allowed_owners() -> tuple[int, ...]:
    """Who may own what root runs: root, and the user installing (a hook installed by another user)."""
    return tuple(sorted({0, os.geteuid()}))


def lib_dirs(package_dir: str = PACKAGE_PARENT) -> tuple[str, ...]:
    """Where this interpreter finds lxml, when not beside the package (a venv with an editable install):
    the hook imports from there without processing every .pth file of the environment."""
    spec = importlib.util.find_spec("lxml")
    if spec is None or not spec.origin:
        return ()
    where = os.path.dirname(os.path.dirname(os.path.realpath(spec.origin)))
    return () if where == os.path.realpath(package_dir) else (where,)


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
      the package and lxml trees, symbolic links inside them followed and checked; the ways to the
      interpreter, its pyvenv.cfg and the standard library through no sticky directory either (the front
      checks none of them: a name in /tmp is anyone's again once it is removed);
    - everything in the package and lib directories the hook puts on sys.path: its interpreter may look up
      any name there (lxml's optional rnc2rng, copy.py's org, ...), and the front checks whatever it finds
      there by the same rule (import_guard) at every start."""
    python = python or sys.executable
    lib = lib_dirs(package_dir) if lib is None else lib
    owners = allowed_owners()
    why = _interpreter_problem(python, owners)
    if why:
        return f"the interpreter {python}: {why}"
    dirs, why = _isolated_path(python)
    if why:
        return f"the interpreter {python}: {why}"
    for directory in dirs:  # as the interpreter: the front checks neither, a sticky directory excuses nothing
        why = (check_tree(directory, owners, sticky_ok=False) if os.path.isdir(directory) else
               check_ancestors(directory, owners, sticky_ok=False))
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
    """The front runs the interpreter by name at every start, unchecked: no directory on the way may be
    open to others, sticky or not (a name in /tmp is anyone's again once a reboot or cleaner removes it)."""
    real, why = resolve_trusted(python, owners, sticky_ok=False)
    if why:
        return why
    why = file_problem(real, owners)
    if why:
        return why
    here = os.path.dirname(os.path.abspath(python))
    for cfg in (os.path.join(here, "pyvenv.cfg"), os.path.join(os.path.dirname(here), "pyvenv.cfg")):
        if not os.path.lexists(cfg):
            continue  # its directory is checked above: nobody else can create one there
        real, why = resolve_trusted(cfg, owners, sticky_ok=False)
        why = why or file_problem(real, owners)
        if why:
            return f"{cfg}: {why}"
        try:
            text = read_regular(real, 64 * 1024)[0].decode("utf-8", "replace")
        except OSError as e:
            return f"{cfg}: {e.strerror or e}"
        for key, value in re.findall(r"^\s*(home|executable)\s*=\s*(.*?)\s*$", text, flags=re.M):
            why = check_ancestors(os.path.join(value, "x"), owners, sticky_ok=False) if key == "home" else \
                _interpreter_file(value, owners)
            if why:
                return f"{cfg} names {key} = {value}: {why}"
        return None  # Python reads the first pyvenv.cfg it finds
    return None


def _interpreter_file(path: str, owners: tuple[int, ...]) -> str | None:
    real, why = resolve_trusted(path, owners, sticky_ok=False)
    return why or file_problem(real, owners)


def _isolated_path(python: str) -> tuple[list[str], str | None]:
    """sys.path of `python -I -S` (the standard library's directories), asked of the interpreter once
    it is known to be root's alone (local_qemu.run; as root, since root runs it as the hook anyway)."""
    import json

    from ..host.local_qemu import run

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
        why = check_dir(directory, owners)
        if why:
            return why
    from .import_guard import Checker

    why = Checker(dirs, owners).tree_problem()
    return shown(why) if why else None  # a link's target is named as its owner chose


def file_problem(path: str, owners: tuple[int, ...]) -> str | None:
    try:
        problem = check_trusted(os.stat(path), owners)
    except OSError as e:
        return f"{path}: {e.strerror}"
    return f"{path} {problem}" if problem else None


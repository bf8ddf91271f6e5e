"""Root imports from the hook's own directories only what root alone can change.

The hook's interpreter asks its package and lib directories for every name an import looks up there,
listed or not: lxml's optional `rnc2rng`, `backports_abc` (Cython's ABC registration), copy.py's `org`
(Jython), whatever a later version adds. So the check is the import system's own lookup: `install`
replaces the path finder with one that checks the files of every module it finds below those directories
(the module, its cached bytecode, a package's directory, a namespace package's portions) and each
directory between them and the search root; a name that is absent there costs nothing more. The front
puts it in place before anything is imported from those directories (the package tree was walked whole
just before); `hook install` and `hook status` check every entry below them (`tree_problem`) with the
same rule, so whatever the front would refuse at a start, install refuses first.

The rule for each name below a root (the way to the root itself is checked by the front and by
install): owned by an allowed owner (root; for install also the user running it) and writable by neither
group nor others; a symbolic link owned so, and where it leads root's alone from / down (a root-owned
sticky directory such as /tmp on the way excepted). A name that does not exist is fine: nobody else can
create it in a directory that passes.
"""

from __future__ import annotations

import os
import stat
import sys

from ..fs.trusted import check_trusted, resolve_trusted


def way_problem(path: str, owners: tuple[int, ...] = (0,)) -> str | None:
    """Why someone not in `owners` could change what `path` names or a name on the way to it, resolved one
    name at a time as the kernel does (trusted.resolve_trusted: each directory looked up in, a root-owned
    sticky one aside, and each link followed), then what it names itself, owned by an owner and writable
    by nobody else. A name that is missing is fine: who could create it is checked above it."""
    real, why = resolve_trusted(path, owners, missing_ok=True)
    if why:
        return why
    try:
        problem = check_trusted(os.lstat(real), owners)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return f"{real} {problem}" if problem else None


def entry_problem(path: str, owners: tuple[int, ...] = (0,)) -> str | None:
    """Why one name below a checked directory is not the owners' alone: another owner, writable by group
    or others, or a link that is another's or leads where someone else can change it. None when it is
    fine or does not exist."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(st.st_mode) and st.st_uid in owners:  # a link's own mode is 0777: where it leads counts
        why = way_problem(path, owners)
        return f"{path} (a link to {os.path.realpath(path)}): {why}" if why else None
    problem = check_trusted(st, owners)
    return f"{path} {problem}" if problem else None


class Checker:
    """The rule applied below `roots` (the directories the hook adds to sys.path), each directory's
    verdict kept for the process."""

    def __init__(self, roots, owners: tuple[int, ...] = (0,), checked=()):
        self.roots = tuple(dict.fromkeys(os.path.normpath(r) for r in roots if r))
        self.owners = owners
        self.checked = tuple(os.path.normpath(c) + "/" for c in checked)  # trees checked whole already
        self._dirs: dict[str, str | None] = {}

    def root_of(self, path: str) -> str | None:
        for root in self.roots:
            if path.startswith(root) and path[len(root):len(root) + 1] == "/":
                return root
        return None

    def path_problem(self, path: str) -> str | None:
        """Why the file or directory `path` below a root, or a name on the way to it, is not the owners'
        alone; None when it is fine or `path` is not below a root."""
        if "//" in path or "/./" in path or "/../" in path or path.endswith(("/", "/.", "/..")):
            path = os.path.normpath(path)  # not as the path finder joins names (a package's own __path__)
        root = self.root_of(path)
        if root is None or path.startswith(self.checked):
            return None
        parts = path[len(root) + 1:].split("/")
        here = root
        for part in parts[:-1]:  # string joins: this runs for every module of a cold start
            here = here + "/" + part
            why = self._dirs.get(here, 0)
            if why == 0:
                why = self._dirs[here] = entry_problem(here, self.owners)
            if why:
                return why
        return entry_problem(path, self.owners)

    def spec_problem(self, spec) -> str | None:
        """Why what the import system would load for `spec` is not the owners' alone: the module's file,
        its cached bytecode (the loader reads that instead when it matches), a namespace package's portions."""
        paths = []
        if spec.origin and spec.has_location:
            paths.append(spec.origin)
            if spec.cached:
                paths.append(spec.cached)
        if spec.submodule_search_locations is not None:
            paths.extend(spec.submodule_search_locations)
        for path in paths:
            why = self.path_problem(path)
            if why:
                return why
        return None

    def tree_problem(self) -> str | None:
        """Why anything below the roots is not the owners' alone: every name the hook's interpreter could
        look up there, walked (install's and status's check; links to directories followed once)."""
        seen = set()
        for root in self.roots:
            todo = [root]
            while todo:
                directory = todo.pop()
                try:
                    st = os.stat(directory)
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                    entries = sorted(os.scandir(directory), key=lambda e: e.name)
                except OSError as e:
                    return f"{directory}: {e.strerror or e}"
                for entry in entries:
                    why = entry_problem(entry.path, self.owners)
                    if why:
                        return why
                    try:
                        if entry.is_dir():  # a link to a directory too: imports go through it
                            todo.append(entry.path)
                    except OSError:
                        pass
        return None


class GuardedPathFinder:
    """The import system's path finder, checking every module it finds below the roots before it is
    loaded; `refuse(name, why)` is called for one that fails (it must not return normally to allow it)."""

    def __init__(self, path_finder, checker: Checker, refuse):
        self.path_finder, self.checker, self.refuse = path_finder, checker, refuse

    def find_spec(self, fullname, path=None, target=None):
        spec = self.path_finder.find_spec(fullname, path, target)
        if spec is not None:
            why = self.checker.spec_problem(spec)
            if why:
                self.refuse(fullname, why)
                raise ImportError(f"not importing {fullname}: {why}", name=fullname)
        return spec

    def invalidate_caches(self):
        self.path_finder.invalidate_caches()

    def __getattr__(self, name):  # find_distributions and the like: the path finder's
        return getattr(self.path_finder, name)


def install(roots, refuse, owners: tuple[int, ...] = (0,), checked=()) -> GuardedPathFinder:
    """Put the guarded finder where the path finder is on sys.meta_path (so an absent name is looked up
    once) and return it. `checked`: trees below the roots the caller has just checked whole, as the front
    does the package's (only root can change them since: their files are not checked again)."""
    for i, finder in enumerate(sys.meta_path):
        if getattr(finder, "__name__", "") == "PathFinder":
            guarded = GuardedPathFinder(finder, Checker(roots, owners, checked), refuse)
            sys.meta_path[i] = guarded
            return guarded
    raise ImportError("no path finder on sys.meta_path")

"""Another local user, as root's code must withstand them: their uid, their files, and the command run the
way root runs it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support import ROOT

NOBODY = 65534
LXML_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__import__("lxml").__file__)))


def theirs(*paths: Path) -> None:
    for p in paths:
        os.chown(p, NOBODY, NOBODY, follow_symlinks=False)


def cli(*args: str, python: str = sys.executable, cwd: Path = ROOT, pythonpath: str | None = None,
        env: dict | None = None) -> subprocess.CompletedProcess:
    environ = dict(os.environ, **(env or {}))
    if pythonpath:
        environ["PYTHONPATH"] = pythonpath
    return subprocess.run([python, "-c", "import sys; from virtxml_cpu.cli import main; sys.exit(main())", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120, env=environ)


def unshared_dir(prefix: str) -> Path:
    """A new directory of this user's on no sticky directory's way, in the home directory: `hook install`
    takes no interpreter below /tmp (where pytest's tmp_path is), as a name there is anyone's again once it
    is removed. The caller removes it."""
    d = Path(tempfile.mkdtemp(prefix=prefix, dir=Path.home()))
    d.chmod(0o755)
    return d

"""Reading inputs and replacing files atomically: a user's file is never left half-written."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

from .errors import BadInput, EnvironmentProblem
from .xmlio import MAX_INPUT_BYTES


def read_input(path: str) -> bytes:
    try:
        if path == "-":
            return sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        with open(path, "rb") as fh:
            return fh.read(MAX_INPUT_BYTES + 1)
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{path}: is a directory") from None
    except PermissionError:
        raise EnvironmentProblem(f"{path}: permission denied") from None
    except OSError as e:
        raise EnvironmentProblem(f"{path}: {e.strerror}") from None


def replace_atomically(path: str, data: bytes, backup_suffix: str | None = None) -> None:
    """Write `data` to `path` via a temp file in the same directory + rename; keep mode and owner.

    A reader sees the old file or the new one, never a partial write."""
    real = os.path.realpath(path)
    directory = os.path.dirname(real) or "."
    try:
        try:
            st = os.stat(real)
        except FileNotFoundError:
            st = None  # a new output file: default mode, our owner
        if backup_suffix and st is not None:
            shutil.copy2(real, real + backup_suffix)
        fd, tmp = tempfile.mkstemp(prefix=".virtxml-cpu.", dir=directory)
    except PermissionError:
        raise EnvironmentProblem(f"{path}: permission denied") from None
    except OSError as e:
        raise EnvironmentProblem(f"{path}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if st is None:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        else:
            os.chmod(tmp, st.st_mode & 0o7777)
        if st is not None and (os.geteuid() == 0 or st.st_uid == os.geteuid()):
            try:
                os.chown(tmp, st.st_uid, st.st_gid)
            except PermissionError:
                pass
        os.replace(tmp, real)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise EnvironmentProblem(f"{path}: {e.strerror}; the original is unchanged") from None

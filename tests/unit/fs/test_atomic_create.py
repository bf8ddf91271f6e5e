"""The one writer's create-only half (atomic.create_at, behind backups and root's fresh files): a name is
made whole or not at all, never over anything already there, with or without hard links."""

from __future__ import annotations

import errno
import os

import pytest

from virtxml_cpu.errors import EnvironmentProblem
from virtxml_cpu.fs import atomic, files
from virtxml_cpu.fs.paths import locate


def _names(d):
    return sorted(p.name for p in d.iterdir())


def test_create_takes_the_first_free_name_and_never_a_taken_one(tmp_path):
    (tmp_path / "a").write_bytes(b"kept")
    (tmp_path / "b").symlink_to(tmp_path / "nowhere")  # dangling: taken all the same, never followed
    dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert atomic.create_at(dfd, ["a", "b", "c"], b"new") == "c"
        assert atomic.create_at(dfd, ["a", "b", "c"], b"newer") is None
    finally:
        os.close(dfd)
    assert (tmp_path / "a").read_bytes() == b"kept" and (tmp_path / "c").read_bytes() == b"new"
    assert not (tmp_path / "nowhere").exists() and _names(tmp_path) == ["a", "b", "c"]  # no temporary file left


def test_without_hard_links_a_failed_write_leaves_no_half_file(tmp_path, monkeypatch):
    """Where link(2) is refused (EPERM: some filesystems), the name is created with O_EXCL and written;
    a write that fails there (a full disk) removes it again and is one line, not a half-written file."""
    real_write, writes = os.write, []

    def write(fd, data):
        writes.append(fd)
        if len(writes) > 1:  # the temporary file is written; the name made without a link is not
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    def link(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", link)
    place = locate(str(tmp_path / "out.xml"))
    try:
        monkeypatch.setattr(os, "write", write)
        with pytest.raises(EnvironmentProblem, match="No space left on device; nothing was written"):
            files.fresh_file(place, b"<domain/>\n", str(tmp_path / "out.xml"))
    finally:
        monkeypatch.setattr(os, "write", real_write)
        os.close(place.dfd)
    assert _names(tmp_path) == []
    place = locate(str(tmp_path / "out.xml"))
    try:
        files.fresh_file(place, b"<domain/>\n", str(tmp_path / "out.xml"))  # no hard links, no failure
    finally:
        os.close(place.dfd)
    assert _names(tmp_path) == ["out.xml"] and (tmp_path / "out.xml").read_bytes() == b"<domain/>\n"

"""The mark `restore begin`/`migrate begin` leave for the next `prepare`: honoured once, fresh, of this boot,
and written and read by root where no other user can steer it."""

from __future__ import annotations

import os
import stat

import pytest

from virtxml_cpu.hook import incoming

UUID = "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66"


@pytest.fixture
def marks(tmp_path):
    return str(tmp_path / "incoming")


def test_a_mark_is_taken_once(marks):
    assert incoming.leave(marks, UUID, "restore") == ""
    assert stat.S_IMODE(os.stat(marks).st_mode) == 0o700
    assert incoming.take(marks, UUID) == "restore"
    assert incoming.take(marks, UUID) is None and os.listdir(marks) == []


def test_a_mark_past_its_time_or_of_another_boot_is_not_honoured(marks, monkeypatch):
    incoming.leave(marks, UUID, "migrate")
    monkeypatch.setattr(incoming, "_now", lambda: incoming.time.monotonic() + incoming.TTL + 1)
    assert incoming.take(marks, UUID) is None and os.listdir(marks) == []
    monkeypatch.undo()
    incoming.leave(marks, UUID, "migrate")
    monkeypatch.setattr(incoming, "_boot_id", lambda: "another-boot")
    assert incoming.take(marks, UUID) is None and os.listdir(marks) == []


@pytest.mark.parametrize("bad", ["../x", "/", "", "0B7E2D1C-6A51-4F0E-8D7B-3C2F9E1A4B66",
                                 "0b7e2d1c6a514f0e8d7b3c2f9e1a4b66", "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b6/",
                                 "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4-66", None])
def test_only_a_canonical_uuid_names_a_mark(marks, bad):
    assert incoming.leave(marks, bad, "restore") != ""
    assert incoming.take(marks, bad) is None
    assert not os.path.exists(marks) or os.listdir(marks) == []


def test_only_restore_and_migrate_leave_marks(marks):
    assert incoming.leave(marks, UUID, "prepare") != "" and not os.path.exists(marks)


def test_a_link_or_fifo_in_place_of_a_mark_is_never_followed_nor_waited_on(marks, tmp_path):
    incoming.leave(marks, UUID, "restore")
    incoming.take(marks, UUID)
    decoy = tmp_path / "decoy"
    decoy.write_text(f"restore {incoming._boot_id()} {incoming.time.monotonic():.3f}\n")
    os.symlink(decoy, os.path.join(marks, UUID))
    assert incoming.take(marks, UUID) is None
    assert decoy.exists() and not os.path.lexists(os.path.join(marks, UUID))  # the link went, not its target
    os.mkfifo(os.path.join(marks, UUID))
    assert incoming.take(marks, UUID) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="NOT ROOT: cannot give the directory to another user")
def test_a_directory_that_is_a_link_or_anothers_is_not_used(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "incoming").symlink_to(real)
    assert "symbolic link" in incoming.leave(str(tmp_path / "incoming"), UUID, "restore")
    assert os.listdir(real) == []
    os.chmod(real, 0o777)
    assert "writable" in incoming.leave(str(real), UUID, "restore")
    os.chmod(real, 0o700)
    incoming.leave(str(real), UUID, "restore")
    os.chown(real, 65534, 65534)
    try:
        assert incoming.take(str(real), UUID) is None and os.listdir(real) == [UUID]
        assert "owned by uid 65534" in incoming.leave(str(real), UUID, "restore")
    finally:
        os.chown(real, 0, 0)


def test_the_marks_are_bounded_and_old_ones_cleared(marks, monkeypatch):
    monkeypatch.setattr(incoming, "MAX_MARKS", 5)
    uuids = [f"{i:08x}-6a51-4f0e-8d7b-3c2f9e1a4b66" for i in range(12)]
    for u in uuids:
        assert incoming.leave(marks, u, "restore") == ""
    assert len(os.listdir(marks)) == 5 and uuids[-1] in os.listdir(marks)
    os.utime(os.path.join(marks, uuids[-1]), (1, 1))  # long past
    incoming.leave(marks, UUID, "migrate")
    assert uuids[-1] not in os.listdir(marks)

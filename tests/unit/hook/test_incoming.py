"""The mark `restore begin`/`migrate begin` leave for the next `prepare`: for one domain (the name libvirt
passes, byte for byte, and the uuid), honoured once, fresh, of this boot, and written and read by root where
no other user can steer it. The attack it stops: `virsh restore OWN.save --xml ALT.xml`, ALT.xml carrying a
victim's uuid, which libvirt hands the hook at `restore begin` under the image's name and rejects only
afterwards."""

from __future__ import annotations

import io
import os
import stat

import pytest

from virtxml_cpu.hook import entry as hook_entry
from virtxml_cpu.hook import evaluate, incoming

from tests.support import FIXTURES, Capture
from tests.support.hook import Host

UUID = "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66"
NAME = "web01"
MARK = incoming.mark_name(NAME, UUID)


@pytest.fixture
def marks(tmp_path):
    return str(tmp_path / "incoming")


def test_a_mark_is_taken_once(marks):
    assert incoming.leave(marks, NAME, NAME, UUID, "restore") == ""
    assert stat.S_IMODE(os.stat(marks).st_mode) == 0o700
    assert incoming.take(marks, NAME, UUID) == "restore"
    assert incoming.take(marks, NAME, UUID) is None and os.listdir(marks) == []


def test_a_mark_past_its_time_or_of_another_boot_is_not_honoured(marks, monkeypatch):
    incoming.leave(marks, NAME, NAME, UUID, "migrate")
    monkeypatch.setattr(incoming, "_now", lambda: incoming.time.monotonic() + incoming.TTL + 1)
    assert incoming.take(marks, NAME, UUID) is None and os.listdir(marks) == []
    monkeypatch.undo()
    incoming.leave(marks, NAME, NAME, UUID, "migrate")
    monkeypatch.setattr(incoming, "_boot_id", lambda: "another-boot")
    assert incoming.take(marks, NAME, UUID) is None and os.listdir(marks) == []


@pytest.mark.parametrize("bad", ["../x", "/", "", "0B7E2D1C-6A51-4F0E-8D7B-3C2F9E1A4B66",
                                 "0b7e2d1c6a514f0e8d7b3c2f9e1a4b66", "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b6/",
                                 "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4-66", None])
def test_only_a_canonical_uuid_names_a_mark(marks, bad):
    assert incoming.leave(marks, NAME, NAME, bad, "restore") != ""
    assert incoming.take(marks, NAME, bad) is None
    assert not os.path.exists(marks) or os.listdir(marks) == []


def test_only_restore_and_migrate_leave_marks(marks):
    assert incoming.leave(marks, NAME, NAME, UUID, "prepare") != "" and not os.path.exists(marks)


def test_a_link_or_fifo_in_place_of_a_mark_is_never_followed_nor_waited_on(marks, tmp_path):
    incoming.leave(marks, NAME, NAME, UUID, "restore")
    incoming.take(marks, NAME, UUID)
    decoy = tmp_path / "decoy"
    decoy.write_text(f"restore {incoming._boot_id()} {incoming.time.monotonic():.3f}\n")
    os.symlink(decoy, os.path.join(marks, MARK))
    assert incoming.take(marks, NAME, UUID) is None
    assert decoy.exists() and not os.path.lexists(os.path.join(marks, MARK))  # the link went, not its target
    os.mkfifo(os.path.join(marks, MARK))
    assert incoming.take(marks, NAME, UUID) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="NOT ROOT: cannot give the directory to another user")
def test_a_directory_that_is_a_link_or_anothers_is_not_used(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "incoming").symlink_to(real)
    assert "symbolic link" in incoming.leave(str(tmp_path / "incoming"), NAME, NAME, UUID, "restore")
    assert os.listdir(real) == []
    os.chmod(real, 0o777)
    assert "writable" in incoming.leave(str(real), NAME, NAME, UUID, "restore")
    os.chmod(real, 0o700)
    incoming.leave(str(real), NAME, NAME, UUID, "restore")
    os.chown(real, 65534, 65534)
    try:
        assert incoming.take(str(real), NAME, UUID) is None and os.listdir(real) == [MARK]
        assert "owned by uid 65534" in incoming.leave(str(real), NAME, NAME, UUID, "restore")
    finally:
        os.chown(real, 0, 0)


def test_the_marks_are_bounded_and_old_ones_cleared(marks, monkeypatch):
    monkeypatch.setattr(incoming, "MAX_MARKS", 5)
    uuids = [f"{i:08x}-6a51-4f0e-8d7b-3c2f9e1a4b66" for i in range(12)]
    for u in uuids:
        assert incoming.leave(marks, NAME, NAME, u, "restore") == ""
    assert len(os.listdir(marks)) == 5 and incoming.mark_name(NAME, uuids[-1]) in os.listdir(marks)
    os.utime(os.path.join(marks, incoming.mark_name(NAME, uuids[-1])), (1, 1))  # long past
    incoming.leave(marks, NAME, NAME, UUID, "migrate")
    assert incoming.mark_name(NAME, uuids[-1]) not in os.listdir(marks)


# --- A mark for one domain only (name as libvirt passes it, and uuid) ---------------------------------------

NEEDS_FIX = (FIXTURES / "handwritten-no-cpu.xml").read_bytes()  # <name>scratch</name>, lacks the bit
OWN = "own"
VICTIM, VICTIM_UUID = "victim", "5f0c9b8a-7d6e-4f3a-9b2c-1d0e9f8a7b6c"
BLANKS = {"nbsp": "\u00a0", "line-separator": "\u2028", "leading-space": " ", "tab": "\t"}


def definition(name: str, uuid: str) -> bytes:
    """The fixture that lacks the fix, named `name` (exactly: nothing escaped but XML's own) with `uuid`."""
    text = name.replace("&", "&amp;").replace("<", "&lt;")
    return NEEDS_FIX.replace(b"<name>scratch</name>", f"<name>{text}</name><uuid>{uuid}</uuid>".encode())


def hook(tmp_path, argv_name: str, xml: bytes, op: str = "prepare") -> tuple[int, list[str]]:
    """The hook in enforce mode as libvirt runs it for `argv_name` with `xml` on stdin."""
    conf = tmp_path / "c.toml"
    # the names here are no libvirt domain's: no transient check (tests/unit/tables/test_orchestrators.py has that)
    conf.write_text(f'[hook]\nmode = "enforce"\nspool = "{tmp_path / "spool"}"\nlibvirt_config_dir = ""\n')
    log = Capture()
    rc = evaluate.run([argv_name, op, "begin", "-"], config_path=str(conf), stdin=io.BytesIO(xml), log=log)
    return rc, log.lines


def test_a_restore_under_ones_own_name_with_a_victims_uuid_lets_no_cold_start_in(tmp_path, capsys):
    """`virsh restore OWN.save --xml ALT.xml`: libvirt runs `own restore begin` with ALT.xml (the victim's
    uuid) on stdin, then rejects the restore. The victim's cold start right after is refused; only a domain
    with both that name and that uuid could take the mark, once."""
    assert hook(tmp_path, OWN, definition(OWN, VICTIM_UUID), op="restore") == (0, [])
    rc, lines = hook(tmp_path, VICTIM, definition(VICTIM, VICTIM_UUID))
    assert rc == 1 and "result=refused" in lines[0] and "after=" not in lines[0], lines
    assert "refusing to start" in capsys.readouterr().err
    rc, lines = hook(tmp_path, OWN, definition(OWN, VICTIM_UUID))
    assert rc == 0 and "op=prepare after=restore " in lines[0], lines
    assert hook(tmp_path, OWN, definition(OWN, VICTIM_UUID))[0] == 1  # once only


def test_a_definition_not_named_as_libvirt_names_it_leaves_no_mark(tmp_path, capsys):
    """ALT.xml naming the victim too (libvirt then refuses the restore: "Target domain name ... does not
    match source"): no mark at all, and the line says why."""
    rc, lines = hook(tmp_path, OWN, definition(VICTIM, VICTIM_UUID), op="restore")
    assert rc == 0 and len(lines) == 1 and 'result="not marked"' in lines[0], lines
    assert "is not the name libvirt passed" in lines[0]
    assert not (tmp_path / "incoming").exists() or os.listdir(tmp_path / "incoming") == []
    rc, lines = hook(tmp_path, VICTIM, definition(VICTIM, VICTIM_UUID))
    assert rc == 1 and "result=refused" in lines[0] and "after=" not in lines[0], lines


@pytest.mark.parametrize("blank", list(BLANKS.values()), ids=list(BLANKS))
def test_a_name_and_its_stripped_form_are_two_domains(tmp_path, capsys, blank):
    """libvirt keeps `web01\\u00a0` and `web01` apart: a mark for one is never taken by the other, either way."""
    padded = f"{blank}web01" if blank == " " else f"web01{blank}"
    for marked, other in ((padded, "web01"), ("web01", padded)):
        assert hook(tmp_path, marked, definition(marked, VICTIM_UUID), op="restore") == (0, [])
        rc, lines = hook(tmp_path, other, definition(other, VICTIM_UUID))
        assert rc == 1 and "after=" not in lines[0], (marked, other, lines)
        rc, lines = hook(tmp_path, marked, definition(marked, VICTIM_UUID))
        assert rc == 0 and "after=restore" in lines[0], (marked, lines)


def test_the_digest_binds_marks_as_a_full_evaluation_does(tmp_path, monkeypatch, capsys):
    """Each operation answered from the decision digest (cached=yes) leaves and takes marks as a full
    evaluation: the attack under one's own name or the victim's fails, the victim's own restore is let in."""

    host = Host(tmp_path, monkeypatch)
    host.config.write_text(host.config.read_text().replace('mode = "audit"', 'mode = "enforce"'))
    host.sock.settimeout(0.2)

    def run(name, xml, op="prepare"):
        rc = hook_entry.main(["", str(host.config), str(host.digests), name, op, "begin", "-"], stdin=io.BytesIO(xml))
        lines = []
        while True:
            try:
                lines.append(host.sock.recv(65536).decode())
            except OSError:
                return rc, lines

    victim = definition(VICTIM, VICTIM_UUID)
    try:
        for cached in (False, True):
            rc, (line,) = run(VICTIM, victim)
            assert rc == 1 and ("cached=yes" in line) == cached, line
        for alt, said in ((definition(OWN, VICTIM_UUID), []), (definition(VICTIM, VICTIM_UUID), ["not marked"])):
            for cached in (False, True):
                rc, lines = run(OWN, alt, "restore")
                assert rc == 0 and len(lines) == len(said) and all(x in y for x, y in zip(said, lines)), lines
                assert all(("cached=yes" in y) == cached for y in lines), lines
            rc, (line,) = run(VICTIM, victim)
            assert rc == 1 and "result=refused" in line and "cached=yes" in line and "after=" not in line, line
        assert run(VICTIM, victim, "restore") == (0, [])
        rc, (line,) = run(VICTIM, victim)
        assert rc == 0 and "after=restore" in line and "cached=yes" in line, line
    finally:
        host.sock.close()


def test_a_mark_is_named_by_neither_the_name_nor_only_the_uuid(marks):
    """The file is the SHA-256 of (exact name bytes, uuid): no byte of a name reaches a path, and two
    domains' marks never share a file (one restore cannot overwrite another's mark)."""
    for name in ("../../etc/x", "web01\u00a0", "web01\u2028", "-v\t%s"):
        assert incoming.leave(marks, name, name, UUID, "restore") == ""
    files = os.listdir(marks)
    assert len(files) == 4 and all(len(f) == 64 and set(f) <= set("0123456789abcdef") for f in files)
    assert incoming.take(marks, "web01", UUID) is None and len(os.listdir(marks)) == 4
    assert incoming.take(marks, "web01\u2028", UUID) == "restore" and len(os.listdir(marks)) == 3


def test_a_definition_named_otherwise_leaves_nothing(marks):
    for defined in ("web01 ", " web01", "web01\u00a0", "WEB01", None):
        assert "not the name libvirt passed" in incoming.leave(marks, "web01", defined, UUID, "restore")
    assert not os.path.exists(marks)


def test_the_marks_and_the_caps_digests_lie_beside_the_spool_wherever_it_is():
    """constants.beside_spool puts a directory in the spool's parent, as os.path.dirname and join would: a
    spool the config moves takes the marks (incoming) and the capabilities digests (qemu-caps) with it."""
    from virtxml_cpu.constants import CAPS_DIGESTS_BESIDE_SPOOL, SPOOL_DIR, STATE_DIR, beside_spool

    assert incoming.beside(SPOOL_DIR) == STATE_DIR + "/incoming"
    assert beside_spool(SPOOL_DIR, CAPS_DIGESTS_BESIDE_SPOOL) == STATE_DIR + "/qemu-caps"
    for spool in ("/srv/vxc/pending", "/srv/vxc/pending/", "/srv//vxc//pending", "/pending", "/srv/vxc/p q"):
        assert beside_spool(spool, "qemu-caps") == os.path.join(os.path.dirname(spool.rstrip("/")) or "/",
                                                                "qemu-caps"), spool

"""The hook's decision digest: a repeat start is answered from it; any change to what the decision read
(the definition, the config, libvirt's capabilities cache, the package) is a miss, never a stale answer."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from virtxml_cpu.core import config
from virtxml_cpu.hook import act, digest, digest_key, entry as hook_entry
from virtxml_cpu.host import caps_cache

from tests.support import ROOT
from tests.support.hook import EMULATOR, XML, Host

@pytest.fixture
def host(tmp_path, monkeypatch):
    h = Host(tmp_path, monkeypatch)
    yield h
    h.sock.close()


def test_a_repeat_start_logs_the_same_line_plus_cached(host):
    first = host.start()
    again = host.start()
    assert "decision=inject" in first and "qemu=upstream" in first and "cached=yes" not in first
    assert again == first + " cached=yes"
    assert len(list(host.digests.iterdir())) == 1


def test_libvirts_per_start_values_still_hit(host):
    """What libvirt changes between two starts of one domain: the root's id (seen in the lab), a dynamic
    security label (SELinux picks a new MCS pair each start)."""
    label = (b"<seclabel type='dynamic' model='selinux' relabel='yes'><label>system_u:system_r:svirt_t:s0:c%d,c9"
             b"</label><imagelabel>system_u:object_r:svirt_image_t:s0:c%d,c9</imagelabel></seclabel></domain>")
    one = XML.replace(b"<domain type='kvm'>", b"<domain type='kvm' id='3'>").replace(b"</domain>", label % (1, 1))
    two = XML.replace(b"<domain type='kvm'>", b"<domain type='kvm' id='41'>").replace(b"</domain>", label % (7, 7))
    assert one != two and digest_key.canonical(one) == digest_key.canonical(two)
    first = host.start(one)
    assert host.start(two) == first + " cached=yes"


def test_a_changed_definition_is_never_answered_from_the_digest(host):
    host.start()
    fixed = XML.replace(b"</os>", b"</os><features><pvspinlock state='on'/></features>")
    line = host.start(fixed)
    assert "cached=yes" not in line and "decision=keep" in line
    renamed = XML.replace(b"<name>scratch</name>", b"<name>scratch2</name>")
    assert "cached=yes" not in host.start(renamed, name="scratch2")
    # the id of a child element, or an attribute that only looks like libvirt's, is the definition's own
    assert digest_key.canonical(XML.replace(b"<domain type='kvm'>", b"<domain type='kvm' id='x1'>")) != digest_key.canonical(XML)
    assert "cached=yes" not in host.start(XML.replace(b"<domain type='kvm'>", b"<domain id='5' type='qemu'>"))


def test_a_changed_config_is_never_answered_from_the_digest(host):
    host.start()
    host.configure('policy = "never"\n')
    line = host.start()
    assert "cached=yes" not in line and "decision=keep" in line and "rule=policy-never" in line
    assert host.start() == line + " cached=yes"


def test_a_changed_capabilities_cache_is_never_answered_from_the_digest(host):
    assert "qemu=upstream" in host.start()
    host.cache("1:8.2.2+ds-0ubuntu1")
    line = host.start()
    assert "cached=yes" not in line and "qemu=ubuntu" in line
    os.unlink(caps_cache.cache_file(EMULATOR, str(host.caps)))
    line = host.start()
    assert "cached=yes" not in line and "qemu=unknown" in line


def test_a_changed_package_is_never_answered_from_the_digest(host, monkeypatch):
    first = host.start()
    monkeypatch.setattr(digest_key, "__version__", "99.0")
    assert host.start() == first  # a miss: the same decision, evaluated again
    assert host.start() == first + " cached=yes"


def test_an_edited_module_is_a_new_package(tmp_path):
    tree = tmp_path / "virtxml_cpu"
    (tree / "tables" / "builds").mkdir(parents=True)
    (tree / "rules.py").write_text("x = 1\n")
    (tree / "tables" / "builds" / "upstream.py").write_text("y = 1\n")
    before = digest_key.package_identity(str(tree))
    os.utime(tree / "tables" / "builds" / "upstream.py", ns=(1, 1))
    assert digest_key.package_identity(str(tree)) != before


@pytest.mark.parametrize("damage", ["flip", "truncate", "link", "foreign", "group-writable"])
def test_a_bad_entry_is_a_miss(host, damage):
    first = host.start()
    (entry,) = host.digests.iterdir()
    raw = entry.read_bytes()
    if damage == "flip":
        entry.write_bytes(raw.replace(b"decision=inject", b"decision=keep").replace(b'"inject"', b'"keep"'))
    elif damage == "truncate":
        entry.write_bytes(raw[: len(raw) // 2])
    elif damage == "link":
        (host.root / "elsewhere").write_bytes(raw)
        entry.unlink()
        entry.symlink_to(host.root / "elsewhere")
    elif damage == "foreign":
        if os.geteuid() != 0:
            pytest.skip("needs root to give the entry to another user")
        os.chown(entry, 65534, 65534)
    else:
        entry.chmod(0o620)
    line = host.start()
    assert line == first  # evaluated again, not answered from the damaged entry


def test_a_directory_others_can_change_is_not_used(host):
    first = host.start()
    host.digests.chmod(0o777)  # anyone could have planted its entry: neither read nor written
    assert host.start() == first and host.start() == first
    host.digests.chmod(0o700)
    assert host.start() == first + " cached=yes"


def test_the_store_is_bounded(host, monkeypatch):
    monkeypatch.setattr(digest, "MAX_ENTRIES", 3)
    for i in range(6):
        host.start(XML.replace(b"<name>scratch</name>", b"<name>s%d</name>" % i), name=f"s{i}")
    assert len(list(host.digests.iterdir())) <= 3


def test_enforce_refuses_from_the_digest_too(host, capsys):
    host.configure()
    host.config.write_text(host.config.read_text().replace('mode = "audit"', 'mode = "enforce"'))
    for cached in (False, True):
        rc = hook_entry.main(["", str(host.config), str(host.digests), "scratch", "prepare", "begin", "-"],
                            stdin=io.BytesIO(XML))
        line = host.sock.recv(65536).decode()
        assert rc == 1 and "result=refused" in line and ("cached=yes" in line) == cached
        assert "refusing to start 'scratch'" in capsys.readouterr().err


def test_a_restores_prepare_answered_from_the_digest_is_not_refused(host, capsys):
    """The verdict kept for a cold start answers the prepare of a restore too: what libvirt runs before it
    (`restore begin`), not the digest, makes it no cold start."""
    host.config.write_text(host.config.read_text().replace('mode = "audit"', 'mode = "enforce"'))
    xml = XML.replace(b"</name>", b"</name><uuid>0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66</uuid>", 1)

    def run(op):
        return hook_entry.main(["", str(host.config), str(host.digests), "scratch", op, "begin", "-"],
                              stdin=io.BytesIO(xml))

    assert run("prepare") == 1 and "result=refused" in host.sock.recv(65536).decode()
    assert run("restore") == 0
    assert run("prepare") == 0
    line = host.sock.recv(65536).decode()
    assert "after=restore" in line and "cached=yes" in line and "needs a cold boot" in line, line
    assert run("prepare") == 1 and "cached=yes" in host.sock.recv(65536).decode()
    assert capsys.readouterr().err.count("refusing to start") == 2


def test_the_hit_path_imports_neither_lxml_nor_the_tables(host, tmp_path):
    """Through the rendered front, as libvirt runs it: the second start imports no lxml, no rule table, no
    typing, no regular expression engine."""
    from virtxml_cpu.hook import install

    wrap = tmp_path / "python-importtime"
    wrap.write_text(f"#!/bin/sh\nexec {sys.executable} -X importtime \"$@\"\n")
    wrap.chmod(0o755)
    front = tmp_path / "hook"
    front.write_text(install.render(install.template(), str(wrap), install.PACKAGE_PARENT, "audit",
                                        str(host.config), install.lib_dirs(), str(host.digests)))
    front.chmod(0o755)
    env = {"LC_ALL": "C", "PATH": "/usr/bin:/bin", "HOME": "/root"}
    runs = [subprocess.run([str(front), "scratch", "prepare", "begin", "-"], input=XML, capture_output=True,
                           env=env, timeout=60) for _ in range(2)]
    lines = [host.sock.recv(65536).decode() for _ in runs]
    assert "cached=yes" not in lines[0] and lines[1].endswith(" cached=yes")
    modules = {line.rsplit("|", 1)[-1].strip() for line in runs[1].stderr.decode().splitlines() if "|" in line}
    assert {"virtxml_cpu.hook.digest", "virtxml_cpu.hook.digest_key"} <= modules
    assert not {"lxml", "lxml.etree", "virtxml_cpu.core.resolve", "virtxml_cpu.tables.builds.known", "virtxml_cpu.tables.properties",
                "typing", "re", "tomllib", "tomli", "toml", "json"} & modules, sorted(modules)


def _metadata_cdata(inner: bytes) -> bytes:
    """`inner` in a CDATA section of namespaced <metadata>, which libvirt keeps verbatim."""
    return XML.replace(b"</devices>", b"</devices><metadata><m:x xmlns:m='urn:x'><![CDATA[" + inner
                       + b"]]></m:x></metadata>")


@pytest.mark.parametrize("inner", [
    b"type='dynamic'" + b"<seclabel>" * 52000,  # openers, no closer: each looked to the end for one
    b"type='dynamic'" + b"<seclabel>" * 52000 + b"</seclabel>",  # openers before one closer
    b"<seclabel type='dynamic'>" + b"<label>" * 74000 + b"</label></seclabel>",
    b"<seclabel type='dynamic'>" + b"<label><" * 65000 + b"</label></seclabel>",  # texts that hold '<'
    b"<seclabel type='dynamic' " * 160000 + b"/></seclabel>",  # openers of one empty tag: each looked to its '>'
], ids=["seclabel", "seclabel-close", "label", "label-lt", "empty-seclabel"])
def test_the_key_of_a_crafted_definition_takes_linear_time(inner):
    """512 KiB of each of the first four took 4-12 s in canonical() (quadratic: minutes at 4 MiB, on every
    start); the 4 MiB of openers of one empty <seclabel .../> took 4 s."""
    import time

    doc = _metadata_cdata(inner)
    t = time.perf_counter()
    out = digest_key.canonical(doc)
    assert time.perf_counter() - t < 0.5
    assert out == doc  # inside CDATA nothing is a label: nothing to drop but what is really one


def test_dynamic_label_texts_are_dropped_and_nothing_else():
    label = (b"<seclabel type='dynamic' model='selinux'><label>a:b:c:s0:c1,c2</label><label>x<y</label>"
             b"<imagelabel>i:j</imagelabel></seclabel><seclabel type='static'><label>keep</label></seclabel>")
    out = digest_key.canonical(XML.replace(b"</devices>", b"</devices>" + label))
    assert b"<label></label><label>x<y</label><imagelabel></imagelabel>" in out and b"<label>keep</label>" in out


def test_a_reinstalled_module_is_a_new_package_even_with_size_and_mtime_restored(tmp_path):
    """dpkg restores a package's mtimes and debhelper clamps them: a rebuild of the same version can have
    every module's size and mtime as before. Its files are new all the same (inode, ctime)."""
    tree = tmp_path / "virtxml_cpu"
    tree.mkdir()
    module = tree / "rules.py"
    module.write_text("x = 1\n")
    os.utime(module, ns=(10**18, 10**18))
    before = digest_key.package_identity(str(tree))
    new = tree / "rules.py.dpkg-new"
    new.write_text("x = 2\n")  # the same size
    os.utime(new, ns=(10**18, 10**18))  # and mtime
    os.replace(new, module)
    assert digest_key.package_identity(str(tree)) != before


def test_a_module_in_any_subpackage_is_part_of_the_package(tmp_path):
    tree = tmp_path / "virtxml_cpu"
    (tree / "render").mkdir(parents=True)
    (tree / "rules.py").write_text("x = 1\n")
    before = digest_key.package_identity(str(tree))
    (tree / "render" / "explain.py").write_text("y = 1\n")
    assert digest_key.package_identity(str(tree)) != before
    with_one = digest_key.package_identity(str(tree))
    (tree / "render" / "deep").mkdir()
    (tree / "render" / "deep" / "more.py").write_text("z = 1\n")
    assert digest_key.package_identity(str(tree)) != with_one


def test_the_config_is_read_once_and_decided_with_the_bytes_of_the_key(host, monkeypatch):
    """The key was made of one read of the config and the decision of another: an edit in between kept a
    decision under the key of a config that did not make it."""
    from virtxml_cpu.core import config

    reads = []
    real = config.read_raw

    def read_raw(path, environ=os.environ):
        raw = real(path, environ)
        reads.append(raw)
        if len(reads) > 1:  # an edit lands between two reads
            return raw.replace(b"[hook]", b'policy = "never"\n[hook]')
        return raw

    monkeypatch.setattr(config, "read_raw", read_raw)
    line = host.start()
    assert len(reads) == 1 and "decision=inject" in line
    monkeypatch.setattr(config, "read_raw", real)
    assert host.start() == line + " cached=yes"


def test_an_entry_is_written_by_the_atomic_writer(host, monkeypatch):
    from virtxml_cpu.fs import atomic

    calls = []
    real = atomic.replace_at

    def replace_at(dfd, name, data, *a, **kw):
        calls.append(name)
        return real(dfd, name, data, *a, **kw)

    monkeypatch.setattr(atomic, "replace_at", replace_at)
    host.start()
    (entry,) = host.digests.iterdir()
    assert calls == [entry.name]


@pytest.mark.parametrize("where", ["store", "act"])
def test_any_exception_fails_open_with_one_line(host, monkeypatch, capsys, where):
    def boom(*a, **kw):
        raise RuntimeError("no space\nleft")

    if where == "store":
        monkeypatch.setattr(digest, "store", boom)
    else:
        from virtxml_cpu.hook import evaluate

        monkeypatch.setattr(evaluate, "act", boom)
    rc = hook_entry.main(["enforce", str(host.config), str(host.digests), "scratch", "prepare", "begin", "-"],
                        stdin=io.BytesIO(XML))
    err = capsys.readouterr().err
    assert rc == 0 and err.count("\n") == 1 and "RuntimeError: no space left" in err and "not checked" in err

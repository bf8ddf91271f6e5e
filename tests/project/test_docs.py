"""The documentation keeps its word: every command README.md and docs/*.md show runs, every relative link
and #anchor resolves, every config and XML snippet is one the tool takes, and the man page names the pages
as the package installs them.

The convention, for whoever writes a page:

- A fenced block with the info string `sh`, `bash`, `shell` or `console` holds commands, one per line
  (a line ending in a backslash continues; a `$ ` prompt is dropped; `#` comments are shell comments).
  Each command is run by this test, in order, in one temporary directory per block.
- A block that is shown but not run carries the word `host` in its info string (```sh host): it needs a
  real host -- root, a libvirtd with real domains, QEMU/KVM, packages installed, the system or the
  checkout changed, or the whole suite. The reader sees the marker as the block's label.
- A block with no info string is output, not commands: it may not start with a `virtxml-cpu` command or
  a `$ ` prompt (so a command cannot hide there unrun).

How a command runs: `bash -o pipefail -c`, in a temporary directory holding a copy of the checkout's
`examples/`, `tests/fixtures/*.xml` (as `tests/fixtures/`) and `vm.xml` (a copy of
examples/fedora-host-model.xml); `virtxml-cpu` on PATH is this checkout's (this interpreter,
`-m virtxml_cpu`); $VIRTXML_CPU_CONFIG names a config of the directory's own (its spool inside it, its
syslog socket absent), so neither the host's /etc/virtxml-cpu nor its spool is read or changed.
libvirt is libvirt's test driver, in-process: `qemu:///system` wherever a command names it, the default
connection of `audit` and `apply` (given `--connect` when they have none) and `virsh`'s default
($LIBVIRT_DEFAULT_URI) all become test:///DIR/.libvirt/node.xml, a node with the domains web01 and db01
(running, both need the fix) that every command opens afresh. A command passes when it exits 0 or 1
(1 is "work found": `--check`, `--dry-run`, `audit`) within 60 s and writes no Python traceback.

Run this file as a script to print how many commands
are run and how many are marked.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from lxml import etree

from tests.support import ROOT
from virtxml_cpu.core.toml_read import toml_reader

PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
SHELLS = {"sh", "bash", "shell", "console"}
HOST_MARK = "host"
TEST_URI = "test://{dir}/.libvirt/node.xml"
TIMEOUT = 60

FENCE = re.compile(r"^```(.*)$")
LIVE_VERB = re.compile(r"\bvirtxml-cpu\s+(audit|apply)\b")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    info: tuple[str, ...]
    lines: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def is_shell(self) -> bool:
        return bool(self.info) and self.info[0] in SHELLS

    @property
    def needs_host(self) -> bool:
        return HOST_MARK in self.info[1:]

    def commands(self) -> list[str]:
        """The block's commands: continuation lines joined, prompts dropped, blank lines skipped."""
        out, pending = [], ""
        for raw in self.lines:
            line = raw[2:] if raw.startswith("$ ") else raw
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            command = (pending + line).strip()
            pending = ""
            if command and not command.startswith("#"):
                out.append(command)
        return out


def blocks(page: Path) -> list[Block]:
    out, info, start, body = [], None, 0, []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        m = FENCE.match(line)
        if m and info is None:
            info, start, body = tuple(m.group(1).split()), number, []
        elif m and info is not None:
            out.append(Block(page, start, info, tuple(body)))
            info = None
        elif info is not None:
            body.append(line)
    assert info is None, f"{page.relative_to(ROOT)}:{start}: a code block is never closed"
    return out


ALL = [b for page in PAGES for b in blocks(page)]
RUN = [b for b in ALL if b.is_shell and not b.needs_host]
MARKED = [b for b in ALL if b.is_shell and b.needs_host]


# --- commands --------------------------------------------------------------------------------------------

NODE = """<node>
{domains}
</node>
"""
DOMAIN = """<domain type='kvm'>
  <name>{name}</name>
  <uuid>{uuid}</uuid>
  <memory unit='KiB'>1048576</memory>
  <vcpu>2</vcpu>
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>
  <cpu mode='host-model'/>
</domain>"""


@pytest.fixture
def workdir(tmp_path):
    """The directory a block's commands run in, with the files and the libvirt the docstring names."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (tmp_path / "tests" / "fixtures").mkdir(parents=True)
    for f in (ROOT / "tests" / "fixtures").glob("*.xml"):
        shutil.copy(f, tmp_path / "tests" / "fixtures" / f.name)
    shutil.copy(ROOT / "examples" / "fedora-host-model.xml", tmp_path / "vm.xml")
    domains = [DOMAIN.format(name=n, uuid=f"6f1e7a52-0c1d-4b8e-9a3f-00000000000{i}")
               for i, n in enumerate(("web01", "db01"), 1)]
    (tmp_path / ".libvirt").mkdir()
    (tmp_path / ".libvirt" / "node.xml").write_text(NODE.format(domains="\n".join(domains)))
    bindir = tmp_path / ".bin"
    bindir.mkdir()
    shim = bindir / "virtxml-cpu"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m virtxml_cpu "$@"\n')
    shim.chmod(0o755)
    spool_dir = tmp_path / ".spool"
    spool_dir.mkdir(mode=0o700)
    (tmp_path / ".config.toml").write_text(f'[hook]\nspool = "{spool_dir}"\nsyslog_socket = "/nonexistent"\n')
    return tmp_path


def for_test_driver(command: str, uri: str) -> str:
    """The command with libvirt pointed at the test driver, as the module docstring says."""
    command = command.replace("qemu:///system", uri)
    pieces = re.split(r"(\|\||&&|[|;])", command)  # each simple command on its own
    for i, piece in enumerate(pieces):
        if LIVE_VERB.search(piece) and "--connect" not in piece:
            pieces[i] = LIVE_VERB.sub(lambda m: f"{m.group(0)} --connect {uri}", piece, count=1)
    return "".join(pieces)


def run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    uri = TEST_URI.format(dir=cwd)
    env = dict(os.environ, PATH=f"{cwd / '.bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
               PYTHONPATH=str(ROOT), VIRTXML_CPU_CONFIG=str(cwd / ".config.toml"), LIBVIRT_DEFAULT_URI=uri)
    return subprocess.run(["bash", "-o", "pipefail", "-c", for_test_driver(command, uri)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)


def check(result: subprocess.CompletedProcess, command: str, where: str) -> None:
    said = f"{where}: `{command}` exited {result.returncode}\n{result.stderr[-2000:]}"
    assert result.returncode in (0, 1), said
    assert "Traceback (most recent call last)" not in result.stderr + result.stdout, said


@pytest.mark.parametrize("block", RUN, ids=[b.where for b in RUN])
def test_every_command_shown_runs(block, workdir):
    if any(LIVE_VERB.search(c) or c.startswith("virsh") or "--connect" in c for c in block.commands()):
        pytest.importorskip("libvirt", reason="libvirt-python is not installed: commands against libvirt's "
                                              "test driver are SKIPPED")
    assert block.commands(), f"{block.where}: a shell block without commands"
    for command in block.commands():
        check(run(command, workdir), command, block.where)


def test_the_runner_fails_a_broken_command(workdir):
    """A command the tool no longer takes, and one that crashes, fail the check above."""
    for command in ("virtxml-cpu explain --no-such-option vm.xml",
                    "virtxml-cpu apply web01 --dry-run --diff",
                    "python3 -c 'raise ValueError'"):  # exit 1, with a traceback
        with pytest.raises(AssertionError):
            check(run(command, workdir), command, "here")


def test_live_commands_reach_the_test_driver(workdir):
    pytest.importorskip("libvirt", reason="libvirt-python is not installed")
    r = run("virtxml-cpu audit --format json", workdir)
    assert r.returncode == 1 and '"domain": "web01"' in r.stdout and '"domain": "db01"' in r.stdout, r.stderr
    r = run("virtxml-cpu apply web01 --diff", workdir)
    assert r.returncode in (0, 1) and "+" in r.stdout and "pvspinlock" in r.stdout, r.stdout + r.stderr


def test_every_shell_block_is_run_or_marked_and_output_blocks_hold_no_command():
    assert RUN and MARKED
    for b in ALL:
        if b.is_shell:
            assert set(b.info[1:]) <= {HOST_MARK}, f"{b.where}: unknown marker {b.info[1:]}"
        elif not b.info:
            first = next((line for line in b.lines if line.strip()), "")
            assert not re.match(r"\s*(\$ |virtxml-cpu |sudo )", first), \
                f"{b.where}: commands belong in a ```sh block (or ```sh {HOST_MARK})"


# --- snippets --------------------------------------------------------------------------------------------

TOML = [b for b in ALL if b.info[:1] == ("toml",)]
XML = [b for b in ALL if b.info[:1] == ("xml",)]


@pytest.mark.parametrize("block", TOML, ids=[b.where for b in TOML])
def test_every_config_shown_is_taken(block, workdir):
    text = "\n".join(block.lines) + "\n"
    toml_reader().loads(text)
    (workdir / "shown.toml").write_text(text)
    r = run("virtxml-cpu explain --no-host-probe --config shown.toml vm.xml", workdir)
    check(r, "explain --config (the block)", block.where)


@pytest.mark.parametrize("block", XML, ids=[b.where for b in XML])
def test_every_xml_shown_is_well_formed(block):
    etree.fromstring("\n".join(block.lines).encode())


# --- links -----------------------------------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(page: Path) -> str:
    """The page without its code blocks and inline code, where links are not links."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but - and _ dropped (a heading's inline code
    keeps its text), spaces to -, repeats numbered -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        m = None if in_code else re.match(r"#{1,6} (.*)", line)
        if m:
            base = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen[base] = seen.get(base, -1) + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_every_docs_page_is_in_the_readme_contents_and_says_what_it_is_for():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in PAGES[1:]:
        assert f"](docs/{page.name})" in readme, f"README.md's contents do not list docs/{page.name}"
        first = next(p for p in page.read_text(encoding="utf-8").split("\n\n")[1:] if p.strip())
        assert first.startswith("This page is for"), f"docs/{page.name} does not open with what it is for"


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 160


# --- the package -----------------------------------------------------------------------------------------

def test_the_package_installs_the_pages_and_the_man_page_names_them():
    assert set((ROOT / "debian" / "virtxml-cpu.docs").read_text().split()) >= {"README.md", "docs/*.md"}
    sys.path.insert(0, str(ROOT / "tools"))
    import gen_package_files as gen

    text = gen.see_also()
    assert text.startswith(".SH SEE ALSO\n")
    for page in PAGES:
        name = page.name + (".gz" if page.stat().st_size > 4096 else "")
        assert f"{gen.DOC_DIR}/{name}".replace("-", "\\-") in text, name



def test_the_built_package_holds_every_page_the_man_page_names():
    """With the .deb `make test` built ($VIRTXML_CPU_DEB): each documentation path in its man page's SEE
    ALSO is a file of the package (the .gz names follow dh_compress, not a guess)."""
    deb = os.environ.get("VIRTXML_CPU_DEB")
    if not deb or not shutil.which("dpkg-deb"):
        pytest.skip("PACKAGE CHECK SKIPPED: no built .deb ($VIRTXML_CPU_DEB, set by `make test` as root)")
    listing = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
    files = {line.split()[-1].lstrip(".") for line in listing.splitlines()}
    with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE) as tar_in:
        man = subprocess.run(["tar", "-xO", "./usr/share/man/man8/virtxml-cpu.8.gz"], stdin=tar_in.stdout,
                             capture_output=True, check=True).stdout
    see_also = gzip.decompress(man).decode().split(".SH SEE ALSO", 1)[1].replace("\\-", "-")
    named = set(re.findall(r"\\fB(/usr/share/doc/virtxml-cpu/[^\\]+)\\fR", see_also))
    assert len(named) == len(PAGES) and named <= files, sorted(named - files)

if __name__ == "__main__":
    run_count = sum(len(b.commands()) for b in RUN)
    marked_count = sum(len(b.commands()) for b in MARKED)
    print(f"{run_count} commands run in {len(RUN)} blocks; {marked_count} marked '{HOST_MARK}' "
          f"in {len(MARKED)} blocks")

"""What reaches a terminal from a definition is escaped; what reaches a pipe or a file is byte-exact.

A definition may hold C1 controls (U+009B, CSI) and bidi overrides (U+202E) wherever XML allows text, e.g.
an <os><cmdline>. `rewrite --diff`, `apply --diff` and interactive `apply`'s question show such a line as
context: on a terminal it is escaped as the audit table escapes a field (errors.shown_lines); into a pipe the
diff is the exact one `patch` applies; `-o` and `--in-place` write the exact bytes. The commands run as
processes on a real pseudo-terminal, libvirt is its test driver loaded from a node file.
"""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys

import pytest

from tests.support import ROOT

CSI, RLO = "\u009b", "\u202e"
RAW = (CSI.encode(), RLO.encode())
ESCAPED = (b"\\x9b", b"\\u202e")
CMDLINE = f"console=ttyS0 {CSI}2J{RLO}lmx.tive"
DOMAIN = f"""<domain type='kvm'>
  <name>{{name}}</name>
  <memory unit='KiB'>65536</memory>
  <vcpu>2</vcpu>
  <os>
    <type arch='x86_64' machine='pc-q35-7.2'>hvm</type>
    <cmdline>{CMDLINE}</cmdline>
  </os>
  <cpu mode='host-model'/>
</domain>
"""
FLAGS = ["--no-host-probe", "--qemu-build", "upstream"]


def run(argv, cwd, terminal: bool, answer: bytes = b"") -> tuple[int, bytes, bytes]:
    """virtxml-cpu ARGV with stdin and stdout on a pseudo-terminal (or pipes): exit status, stdout, stderr."""
    (cwd / "config.toml").write_text("")  # not the host's /etc/virtxml-cpu
    env = dict(os.environ, PYTHONPATH=str(ROOT), VIRTXML_CPU_CONFIG=str(cwd / "config.toml"))
    cmd = [sys.executable, "-m", "virtxml_cpu", *argv]
    if not terminal:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
        return p.returncode, p.stdout, p.stderr
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    if answer:
        os.write(master, answer)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    err = p.stderr.read()
    return p.wait(timeout=60), out, err


@pytest.fixture
def vm(tmp_path):
    path = tmp_path / "vm.xml"
    path.write_text(DOMAIN.format(name="vm"))
    return path


@pytest.fixture
def node(tmp_path):
    pytest.importorskip("libvirt", reason="libvirt-python is not installed: apply through the test driver SKIPPED")
    path = tmp_path / "node.xml"
    path.write_text("<node>\n" + DOMAIN.format(name="vm") + "</node>\n")
    return f"test://{path}"


def assert_escaped(out: bytes) -> None:
    assert not any(raw in out for raw in RAW), out
    assert all(e in out for e in ESCAPED), out


def test_rewrite_diff_on_a_terminal_is_escaped(vm, tmp_path):
    code, out, err = run(["rewrite", "--diff", *FLAGS, str(vm)], tmp_path, terminal=True)
    assert code == 0, err
    assert b"+  <features>" in out and b" <cmdline>console=ttyS0 " in out
    assert_escaped(out)


def test_rewrite_diff_into_a_pipe_is_exact_and_patch_applies_it(vm, tmp_path):
    code, diff, err = run(["rewrite", "--diff", *FLAGS, "vm.xml"], tmp_path, terminal=False)
    assert code == 0, err
    assert CMDLINE.encode() in diff and not any(e in diff for e in ESCAPED)
    code, fixed, err = run(["rewrite", *FLAGS, "vm.xml"], tmp_path, terminal=False)
    assert code == 0, err
    if shutil.which("patch") is None:
        pytest.skip("patch is not installed: the piped diff was checked byte-exact only; applying it SKIPPED")
    subprocess.run(["patch", "-s", "-p1"], input=diff, cwd=tmp_path, check=True, capture_output=True)
    assert vm.read_bytes() == fixed


@pytest.mark.parametrize("how", (["-o", "out.xml"], ["--in-place"]))
def test_files_written_keep_the_exact_bytes_even_from_a_terminal(how, vm, tmp_path):
    code, out, err = run(["rewrite", *how, *FLAGS, "vm.xml"], tmp_path, terminal=True)
    assert code == 0, err
    written = (tmp_path / ("out.xml" if how[0] == "-o" else "vm.xml")).read_bytes()
    assert CMDLINE.encode() in written and b"<pvspinlock state='on'/>" in written


def test_apply_diff_on_a_terminal_is_escaped_and_exact_into_a_pipe(node, tmp_path):
    argv = ["apply", "--diff", "--connect", node, *FLAGS, "--", "vm"]
    code, out, err = run(argv, tmp_path, terminal=True)
    assert code == 1 and b"+  <features>" in out, err  # 1: work found, nothing defined
    assert_escaped(out)
    code, out, err = run(argv, tmp_path, terminal=False)
    assert code == 1 and CMDLINE.encode() in out and not any(e in out for e in ESCAPED), err


def test_apply_question_is_escaped(node, tmp_path):
    code, out, err = run(["apply", "--connect", node, *FLAGS, "--", "vm"], tmp_path, terminal=True, answer=b"n\n")
    said = out + err  # Python's input() writes its prompt to stderr when it reads a terminal
    assert b"+  <features>" in said and b"Define 'vm' with this change? [y/N]" in said, said
    assert b"vm: skipped: not confirmed" in out and b"skipped 1" in err and code == 0, said
    assert_escaped(said)


def test_shown_lines_escapes_each_line_as_a_name_is_escaped():
    from virtxml_cpu.errors import shown, shown_lines

    text = f" <cmdline>a\\b{CSI}</cmdline>\r\n+\t<pvspinlock state='on'/>\n-\u2028x\x1b[2J\n"
    assert shown_lines(text) == (" <cmdline>a\\\\b\\x9b</cmdline>\\r\n+\t<pvspinlock state='on'/>\n"
                                 "-\\u2028x\\x1b[2J\n")
    assert shown_lines("plain\n") == "plain\n" and shown_lines(RLO) == shown(RLO) == "\\u202e"

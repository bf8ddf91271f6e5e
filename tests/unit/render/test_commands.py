"""A domain name is data everywhere: every verb that takes names reads them after `--`, and every command
suggested to a person (render/commands.py) runs as shown and reaches exactly the names in it.

libvirt defines a domain under any name without a `/` or a newline, so names below are ones an attacker
who may define or rename a domain can pick: options of our own (`--all`, `--pending`, `-y`), libvirt's ext
transport through `--connect=` (it runs the command named, here a program that leaves a mark), shell
syntax, quotes, a tab, a C1 control (U+009B) and a bidi override (U+202E). libvirt is its test driver:
in-process through cli.main (test:///default), or loaded from a node file by whole processes.
"""

from __future__ import annotations

import os
import re
import pty
import shlex
import subprocess
import sys
from urllib.parse import quote
from xml.sax.saxutils import escape

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from virtxml_cpu import cli
from virtxml_cpu.render import commands

from tests.support import ROOT

FLAGS = ["--no-host-probe", "--qemu-build", "upstream"]
SHELL_SYNTAX = ["web01;sh .p;#", "a b'c\"d$(touch pwned)`touch pwned`", "back\\slash %s %n", "*"]
CONTROLS = ["tab\there", "csi\u009b2J", "rlo\u202eevil"]
DASHED = ["-v\u2028", "-\u2028", "--\u2028", "-vPATH\x85", "-e\r"]  # an option of printf's, were it the format


def hostile(tmp_path) -> list[str]:
    mark = tmp_path / "mark"
    prog = tmp_path / "leave-mark"
    prog.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(mark))}\n")
    prog.chmod(0o755)
    return ["--all", "--pending", "-y", f"--connect=qemu+ext:?command={quote(str(prog), safe='')}",
            *SHELL_SYNTAX, *CONTROLS, *(n for n in DASHED if "\r" not in n)]
    # A name with a CR is left out here: libvirt's XMLDesc writes the CR bare, and defining that text again
    # reads it as a newline, which libvirt refuses (apply then says so; the definition stays as it was).


def domain(name: str, fixed: bool = False) -> str:
    features = "<features><pvspinlock state='on'/></features>" if fixed else ""
    return (f"<domain type='kvm'><name>{escape(name, {chr(13): '&#13;'})}</name>"  # a bare CR would read as LF
            "<memory unit='MiB'>64</memory><vcpu>2</vcpu>"
            f"<os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>{features}"
            "<cpu mode='host-model'/></domain>")


@pytest.mark.parametrize("name", ["--all", "--pending", "--yes", "-y", "--connect=qemu+ext:?command=x",
                                  "--policy=always", "-h", "--", *SHELL_SYNTAX])
def test_a_suggested_apply_parses_to_that_name_and_nothing_else(name):
    suggested = commands.apply_fix("qemu+ssh://kvm1/system", [name, "web02"], ["--policy", "numa"])
    argv = shlex.split(suggested)
    assert argv[0] == "virtxml-cpu"
    args = cli.build_parser().parse_args(argv[1:])
    assert args.command == "apply" and args.domains == [name, "web02"]
    assert args.connect == ["qemu+ssh://kvm1/system"] and args.policy == "numa"
    assert not (args.all or args.pending or args.yes or args.dry_run or args.diff)


# Every shell a person may paste a suggested command into, as `SHELL -c`: (label, argv, Debian package).
SHELLS = [("dash", ["dash", "-c"], "dash"), ("bash", ["bash", "-c"], "bash"),
          ("bash --posix", ["bash", "--posix", "-c"], "bash"), ("zsh", ["zsh", "-c"], "zsh"),
          ("zsh as sh", ["zsh", "--emulate", "sh", "-c"], "zsh"), ("mksh", ["mksh", "-c"], "mksh"),
          ("busybox sh", ["busybox", "sh", "-c"], "busybox")]
LOCALES = ["C.UTF-8", "C"]


def installed_shells() -> list[list[str]]:
    """The argv of each shell of SHELLS; one that is missing is installed as root (tests/lab/need-pkgs.sh, as
    `make test` does), and skipped, loudly, only when not root."""
    import shutil

    missing = sorted({pkg for _label, argv, pkg in SHELLS if not shutil.which(argv[0])})
    if missing and os.geteuid() == 0:
        subprocess.run(["bash", "-c", '. tests/lab/need-pkgs.sh && need_pkgs "$@"', "need-pkgs", *missing],
                       cwd=ROOT, check=True, timeout=900)
    absent = [label for label, argv, _pkg in SHELLS if not shutil.which(argv[0])]
    if absent and os.geteuid() == 0:
        pytest.fail(f"shells still missing after installing them: {', '.join(absent)}")
    if absent:
        pytest.skip(f"SHELLS NOT INSTALLED AND NOT ROOT TO INSTALL THEM: {', '.join(absent)}: how they read a "
                    "suggested command is NOT TESTED")
    return [argv for _label, argv, _pkg in SHELLS]


@pytest.fixture(scope="module")
def shells() -> list[list[str]]:
    return installed_shells()


def read_back(shells, script: str) -> dict[str, bytes]:
    """What each shell, in each locale, prints for `script`; a shell that fails says so."""
    out = {}
    for argv in shells:
        for locale in LOCALES:
            r = subprocess.run(argv + [script], capture_output=True, timeout=30,
                               env={"PATH": "/usr/bin:/bin", "LC_ALL": locale, "HOME": "/"})
            assert r.returncode == 0 and not r.stderr, (argv, locale, script, r.stderr)
            out[f"{' '.join(argv[:-1])} LC_ALL={locale}"] = r.stdout
    return out


@pytest.mark.parametrize("name", CONTROLS + DASHED + ["plain", "t\t%s\\'x%%\u009b\\n", "\\c\x01", "\\0\x02",
                                                       "-n\t", "%b\u3000", *SHELL_SYNTAX])
def test_a_suggested_word_is_printable_and_every_shell_reads_it_back_exactly(shells, name):
    w = commands.word(name)
    assert w.isprintable()
    said = read_back(shells, f"printf '%s' {w}")
    assert said == dict.fromkeys(said, name.encode()), w


def test_an_undecodable_byte_of_argv_reads_back_as_that_byte(shells):
    """The hook's argv is decoded with surrogateescape: a byte that is not UTF-8 is that byte again."""
    name = os.fsdecode(b"-v\xff\xc3web01")
    said = read_back(shells, f"printf '%s' {commands.word(name)}")
    assert said == dict.fromkeys(said, b"-v\xff\xc3web01")


# Names an attacker may pick: leading dashes, C0 and C1 controls (NEL, CR, tab), bidi controls and line or
# paragraph separators, blanks other than the space, quotes, printf's `%` and `\`, the shell's `$` and
# backquote, characters beyond the BMP; besides any other character but NUL (no argv holds one).
TRICKY = ["-", "--", "-v", "-e", "-n", "%", "%b", "%s", "\\", "\\c", "\\0", "\\1", "'", '"', "$", "`", "$(", "\x85",
          "\r", "\t", "\x1b", "\x7f", "\x9b", "\x01", "\u202e", "\u2028", "\u2029", "\u2066", "\u2069", "\u200b",
          "\u00a0", "\u3000", "\U0001f600", "\U00010348", " ", "\n"]
NAMES = st.builds(lambda head, rest: head + rest, st.sampled_from(["", "-", "--", "-v", "-e", "-vPATH"]),
                  st.lists(st.one_of(st.sampled_from(TRICKY),
                                     st.characters(blacklist_categories=("Cs",), blacklist_characters="\0")),
                           min_size=1, max_size=8).map("".join))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES)
def test_any_name_as_a_suggested_word_reads_back_exactly_in_every_shell(shells, name):
    """`printf '%s' WORD` in dash, bash (also --posix), zsh (native and as sh), mksh and busybox sh, in a
    UTF-8 and the C locale, prints exactly the name's bytes; the word shows no control or bidi character
    (a trailing newline, which no libvirt name has, aside)."""
    w = commands.word(name)
    assert w.isprintable() or name.endswith("\n")
    said = read_back(shells, f"printf '%s' {w}")
    assert said == dict.fromkeys(said, name.encode()), w


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(NAMES, min_size=1, max_size=3))
def test_a_suggested_apply_gives_every_shell_exactly_these_arguments(shells, names):
    """The whole suggested command, its words set as the positional parameters, is the program, the options,
    `--` and the names, nothing more, in every shell."""
    hint = commands.apply_fix("qemu:///system", names, ["--yes"])
    said = read_back(shells, f"set -- {hint}; printf '%s\\0' \"$@\"")
    want = b"".join(w.encode() + b"\0" for w in ["virtxml-cpu", "apply", "--connect", "qemu:///system", "--yes", "--",
                                                 *names])
    assert said == dict.fromkeys(said, want), hint


def test_explain_takes_a_hostile_name_attached_to_domain():
    for name in ["--all", "--all-domains", "--connect=qemu+ext:?command=x", "-h"]:
        args = cli.build_parser().parse_args(["explain", f"--domain={name}"])
        assert args.domain == [name] and not args.all_domains and args.connect is None


@pytest.fixture
def driver(tmp_path):
    """test:///default (one process shares it while a connection is open) with a hostile-named domain for
    each name, a bystander that needs the fix, and one that has it."""
    libvirt = pytest.importorskip("libvirt", reason="libvirt-python is not installed: names through libvirt's "
                                                    "test driver SKIPPED")
    conn = libvirt.open("test:///default")
    names = hostile(tmp_path)
    doms = [conn.defineXML(domain(n)) for n in names]
    doms += [conn.defineXML(domain("vxc-bystander")), conn.defineXML(domain("vxc-has", fixed=True))]
    yield conn, names
    for d in doms:
        d.undefine()
    conn.close()


def test_apply_and_audit_read_every_name_after_the_double_dash(driver, tmp_path, capsys):
    conn, names = driver
    assert [d.name() for d in conn.listAllDomains()].count("--all") == 1  # libvirt took the names as given
    assert cli.main(["audit", "--connect", "test:///default", *FLAGS, "--format", "json", "--", *names]) == 1
    out = capsys.readouterr().out
    assert "vxc-bystander" not in out and "vxc-has" not in out and "\"test\"" not in out
    assert cli.main(["apply", "--connect", "test:///default", *FLAGS, "--yes", "--", *names]) == 0
    assert f"changed {len(names)}, would change 0, unchanged 0" in capsys.readouterr().err
    for d in conn.listAllDomains():
        assert ("pvspinlock" in d.XMLDesc(0)) == (d.name() in names + ["vxc-has"]), d.name()
    assert not (tmp_path / "mark").exists()


def on_terminal(command: str, cwd, answer: bytes) -> tuple[int, bytes]:
    """`sh -c COMMAND` on a pseudo-terminal, as a person pastes it into a shell, `virtxml-cpu` on PATH."""
    bindir = cwd / "bin"
    bindir.mkdir(exist_ok=True)
    shim = bindir / "virtxml-cpu"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m virtxml_cpu "$@"\n')
    shim.chmod(0o755)
    (cwd / "config.toml").write_text("")
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", PYTHONPATH=str(ROOT),
               VIRTXML_CPU_CONFIG=str(cwd / "config.toml"))
    master, slave = pty.openpty()
    p = subprocess.Popen(["sh", "-c", command], cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    os.write(master, answer)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(timeout=60), out


def test_audits_fix_with_line_runs_as_shown_and_reaches_exactly_those_domains(tmp_path):
    """audit (a whole process, the node file) suggests `fix with: ...`; that line, pasted into sh on a
    terminal and answered yes to each question, fixes the domains audit named and no other, and runs
    nothing a name holds."""
    pytest.importorskip("libvirt", reason="libvirt-python is not installed: SKIPPED")
    names = hostile(tmp_path)
    node = tmp_path / "node.xml"
    node.write_text("<node>\n" + "\n".join([domain(n) for n in names] + [domain("vxc-has", fixed=True)])
                    + "\n</node>\n")
    uri = f"test://{node}"
    env = dict(os.environ, PYTHONPATH=str(ROOT), VIRTXML_CPU_CONFIG=str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    audit = subprocess.run([sys.executable, "-m", "virtxml_cpu", "audit", "--connect", uri, *FLAGS],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert audit.returncode == 1, audit.stderr
    (hint,) = [x[len("fix with: "):] for x in audit.stderr.splitlines() if x.startswith("fix with: ")]
    words = shlex.split(hint)
    assert hint.isprintable() and words.index("--") < min(words.index(n) for n in ("--all", "--pending", "-y"))
    code, out = on_terminal(hint, tmp_path, b"y\n" * (len(names) + 2))
    text = out.decode("utf-8", "replace")
    assert code == 0, text
    assert f"changed {len(names)}, would change 0, unchanged 0, managed 0, skipped 0, unknown 0, failed 0" in text, text
    said = {x.split(": added kvm-pv-unhalt;")[0].split("[y/N] ")[-1]  # the typed-ahead answer: no newline
            for x in text.splitlines() if ": added kvm-pv-unhalt;" in x}
    from virtxml_cpu.errors import shown
    assert said == {shown(n) for n in names}, text
    assert not (tmp_path / "mark").exists() and not (tmp_path / "pwned").exists()


DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted(p for p in (ROOT / "contrib").rglob("*") if p.is_file()),
             *sorted(p for p in (ROOT / "debian").iterdir() if p.is_file())]
COMMAND = re.compile(r"virtxml-cpu\s+(?:apply|audit|explain)\b[^`#\n|;&]*")


def shown_commands():
    """Every `virtxml-cpu apply|audit|explain ...` the docs, the role, the units and the package show."""
    for path in DOC_FILES:
        for n, text in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for m in COMMAND.finditer(text):
                yield f"{path.relative_to(ROOT)}:{n}", m.group(0).strip()


def test_every_command_shown_with_domain_names_puts_them_after_the_double_dash():
    checked = 0
    for where, command in shown_commands():
        try:
            words = shlex.split(command.replace("{{", "").replace("}}", ""))
            args = cli.build_parser().parse_args(words[1:])
        except (SystemExit, ValueError):  # prose ("apply's question"), not a command line
            continue
        names = getattr(args, "domains", None) or []
        if names:
            checked += 1
            assert "--" in words and words.index("--") < words.index(names[0]), f"{where}: {command}"
        for name in getattr(args, "domain", None) or []:
            checked += 1
            assert f"--domain={name}" in words, f"{where}: {command} (--domain=NAME: one word, never an option)"
    assert checked >= 3  # README's and live.md's examples name domains


def test_apply_on_a_wedged_host_says_the_command_that_finishes_it(monkeypatch, capsys):
    """The domains a stalled host did not reach come back as one `finish with:` line: the same mode and
    deciding options, those names after `--`, and nothing else."""
    import threading

    from virtxml_cpu.live import apply

    pytest.importorskip("libvirt", reason="libvirt-python is not installed: SKIPPED")
    release = threading.Event()
    rest = ["--all", "web01;sh .p;#", "csi\u009b2J", *DASHED]

    def wedged(uri, which, opts, res):
        res.todo = ["a", *rest]
        res.done.append(res.todo.pop(0))
        release.wait(30)

    monkeypatch.setattr(apply, "apply_into", wedged)
    try:
        code = cli.main(["apply", "--connect", "qemu+tcp://wedged/system", "--timeout", "0.05", "--yes",
                         "--policy", "numa", "--all"])
    finally:
        release.set()
    assert code == 3
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("finish with: ")]
    hint = line[len("finish with: "):]
    assert hint.isprintable()
    argv = subprocess.run(["sh", "-c", f"set -- {hint}; printf '%s\\0' \"$@\""], capture_output=True,
                          check=True).stdout.decode().split("\0")[:-1]
    assert argv[0] == "virtxml-cpu"
    args = cli.build_parser().parse_args(argv[1:])
    assert args.domains == rest and args.connect == ["qemu+tcp://wedged/system"] and args.policy == "numa"
    assert args.yes and not (args.all or args.pending or args.diff or args.dry_run)

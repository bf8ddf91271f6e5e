#!/usr/bin/python3
"""Files of the Debian package that are derived, not written: the man page and the bash completion
(both from the live argparse parser, so they cannot drift from the command) and the installed hook.

    python3 tools/gen_package_files.py man OUT          # virtxml-cpu(8), roff, via argparse-manpage
    python3 tools/gen_package_files.py completion OUT   # bash completion
    python3 tools/gen_package_files.py hook OUT         # the qemu hook for /usr/bin/python3, audit mode

Run from the source tree (it imports virtxml_cpu from there). debian/rules calls it at build time with
Debian's python3-argparse-manpage; the RPM's spec (rpm/virtxml-cpu.spec) with its own paths:
`man --docs-uncompressed` (rpm compresses man pages, not documentation) and `hook --package-dir
SITELIB --lib-dir SITEARCH` (lxml is arch-specific there, in lib64/, beside nothing of ours).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from virtxml_cpu import __version__, constants  # noqa: E402
from virtxml_cpu.cli import build_parser  # noqa: E402
from virtxml_cpu.core import precedence  # noqa: E402
from virtxml_cpu.hook.install import render, template  # noqa: E402

SYSTEM_PYTHON = "/usr/bin/python3"
SYSTEM_PACKAGE_DIR = "/usr/lib/python3/dist-packages"
HOOK_MODE = "audit"
SPOOL_DIR = constants.STATE_DIR  # the spool's parent: the state the units may write
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"

# One row per config key: (key as written in the file, what it does). Every key core/config.py accepts must
# have a row (tests/project/test_debian.py checks it), so the man page lists them all.
CONFIG_KEYS = (
    ("policy", f"when to add kvm-pv-unhalt: compat, numa, always or never (default {precedence.DEFAULT_POLICY})"),
    ("style", "how to add it: pvspinlock (<features><pvspinlock state='on'/>, the default) or "
              "cpu-feature (<cpu><feature policy='require' name='kvm_pv_unhalt'/>, which libvirt 9.0-11.3 "
              "refuse to start)"),
    ("qemu_build", "the QEMU build the guests run on: upstream, ubuntu or rhel (default: detected)"),
    ("qemu_version", "the QEMU release the guests run on, X.Y[.Z] (default: detected from libvirt or the "
                     "local QEMU); a property or compat row newer than it does not apply"),
    ("timeout", "seconds a libvirt host may stay silent while connecting or on any call "
                f"(default {precedence.DEFAULT_TIMEOUT:g})"),
    ("host_timeout", f"seconds a whole host may take (default {precedence.HOST_TIMEOUT_FACTOR} times timeout)"),
    ("hook.mode", "what the hook does at guest start: audit (log), enforce (refuse the start) or queue "
                  f"(log and queue the fix for apply --pending); default {precedence.DEFAULT_HOOK_MODE}"),
    ("hook.spool", f"where queue mode records pending fixes (default {constants.SPOOL_DIR})"),
    ("hook.syslog_socket", "the datagram socket the hook and watch log to (default /dev/log; stderr "
                           "when it cannot be reached)"),
    ("hook.libvirt_config_dir", "where libvirt keeps persistent definitions, NAME.xml (default "
                                f"{constants.LIBVIRT_CONFIG_DIR}): a guest without one is transient and the "
                                "hook neither refuses nor queues it; \"\" takes every guest as persistent"),
)

EXIT_STATUS = (
    ("0", "done"),
    ("1", "work found: rewrite --check or apply --dry-run would change something, audit found a domain "
          "that needs the fix, verify found a disagreement with this host's QEMU; hook status: not installed"),
    ("2", "bad input or usage: XML that is not a domain or not well-formed, a bad config, an unknown "
          "domain name, a foreign hook in the way"),
    ("3", "environment: libvirt missing or unreachable, permission denied, a write that failed, KVM or "
          "QEMU unusable for verify"),
)

FILES = (
    (constants.CONFIG_PATH, "the host-wide settings (see CONFIGURATION)"),
    ("/etc/libvirt/hooks/qemu.d/virtxml-cpu", "the libvirt qemu hook; libvirtd reads hooks when it starts "
                                              "and on SIGHUP (systemctl reload libvirtd)"),
    (constants.SPOOL_DIR, "fixes queued by the hook in queue mode, for virtxml-cpu apply --pending"),
    (constants.VERIFIED_RECORD, "the QEMU builds virtxml-cpu verify found in agreement with the "
                                           "rules on this host (root-owned; apply and hook install note "
                                           "an unverified build)"),
    (f"{TEXTFILE_DIR}/virtxml-cpu.prom", "written by virtxml-cpu-audit.service (virtxml-cpu-audit.timer) "
                                         "for prometheus-node-exporter's textfile collector"),
)


def _roff(text: str) -> str:
    """Plain text as one roff paragraph: backslashes and dashes escaped, no line starting with a dot."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line for line in text.splitlines())


def _section(title: str, rows) -> str:
    out = [f".SH {title}"]
    for term, text in rows:
        out += [".TP", f"\\fB{_roff(term)}\\fR", _roff(text)]
    return "\n".join(out)


def manpage(parser: argparse.ArgumentParser | None = None, date: datetime.date | None = None,
            compressed_docs: bool = True) -> str:
    """virtxml-cpu(8): argparse-manpage's rendering of every verb and option, then the exit status,
    the config keys and the files."""
    from build_manpages.manpage import Manpage

    parser = parser or build_parser()
    if date is None:
        epoch = os.environ.get("SOURCE_DATE_EPOCH")  # reproducible builds: the changelog's date
        date = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc).date() if epoch
                else datetime.date.today())
    parser.man_short_description = ("compute the CPU features QEMU gives a libvirt guest and add "
                                    "kvm-pv-unhalt where the rules say so")
    body = str(Manpage(parser)).splitlines()
    assert body[0].startswith(".TH "), body[0]
    body[0] = (f'.TH VIRTXML\\-CPU 8 "{date.isoformat()}" "virtxml-cpu {__version__}" '
               '"System Administration"')
    config_text = ("A TOML file; every key is optional. Precedence: the domain's own metadata "
                   "(<vxc:cpu xmlns:vxc='urn:virtxml-cpu:domain:1' policy='never'/>), then the command "
                   "line, then this file. Keys named hook.X go in a [hook] table.")
    extra = [
        _section("EXIT STATUS", EXIT_STATUS),
        ".SH CONFIGURATION\n" + _roff(f"{constants.CONFIG_PATH} (or --config FILE, or $VIRTXML_CPU_CONFIG). "
                                      + config_text),
        "\n".join(_section("", CONFIG_KEYS).splitlines()[1:]),
        _section("FILES", FILES),
        see_also(compressed=compressed_docs),
    ]
    return "\n".join(body + extra) + "\n"


DOC_DIR = "/usr/share/doc/virtxml-cpu"  # where debian/virtxml-cpu.docs puts README.md and docs/*.md
SOURCE = Path(__file__).resolve().parent.parent


def installed_docs(source: Path = SOURCE, compressed: bool = True) -> list[tuple[str, str]]:
    """(installed name, title) of README.md and every docs/*.md, as the package installs them: flat in
    DOC_DIR, and (`compressed`: the .deb) compressed by dh_compress when larger than 4 KiB (its rule for
    /usr/share/doc); the RPM installs them as they are."""
    pages = [source / "README.md"] + sorted((source / "docs").glob("*.md"))
    out = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), page.stem)
        if page.name == "README.md":
            title = "start here: the problem, install, the first five minutes on a host"
        out.append((page.name + (".gz" if compressed and page.stat().st_size > 4096 else ""), title))
    return out


def see_also(source: Path = SOURCE, compressed: bool = True) -> str:
    """SEE ALSO: the libvirt tools, then each page of the documentation as installed, with its title."""
    intro = (f"The documentation, installed in {DOC_DIR}/ (a name ending in .gz is compressed: read it "
             "with zless):") if compressed else f"The documentation, installed in {DOC_DIR}/:"
    return "\n".join([".SH SEE ALSO", "\\fBvirsh\\fR(1), \\fBlibvirtd\\fR(8).", ".PP", _roff(intro)]
                     + [line for name, title in installed_docs(source, compressed)
                        for line in (".TP", f"\\fB{_roff(f'{DOC_DIR}/{name}')}\\fR", _roff(title))])


FILE_DESTS = ("files", "output", "config", "capabilities", "domcapabilities")  # options naming a file
DIR_DESTS = ("hooks_dir", "digest_dir")


def completion(parser: argparse.ArgumentParser | None = None) -> str:
    """Bash completion of verbs, options and their choices (files where an argument names a file),
    by walking the parser. (Debian 12's python3-shtab 1.5.5 completes only the first of several
    choices, shtab issue #86, so the script is generated here.)"""
    parser = parser or build_parser()
    verbs = {name: sub for action in parser._actions if isinstance(action, argparse._SubParsersAction)
             for name, sub in action.choices.items()}
    values, words = [], []
    for verb, sub in [("", parser)] + list(verbs.items()):
        for action in sub._actions:
            if action.option_strings and action.nargs != 0:
                pattern = "|".join(f"{verb}:{option}" for option in action.option_strings)
                values.append(f"        {pattern}) {_reply(action)}; return ;;")
        options = " ".join(o for action in sub._actions for o in action.option_strings)
        positional = next((a for a in sub._actions if not a.option_strings), None)
        if isinstance(positional, argparse._SubParsersAction):
            other = _words(" ".join(verbs))
        else:
            other = _reply(positional) if positional is not None else ":"
        words.append(f'        "{verb}") if [[ $cur == -* && -z $ended ]]; then {_words(options)}; else {other}; fi ;;')
    verb_alternatives = "|".join(verbs)
    return f"""# bash completion for virtxml-cpu(8), generated from its argparse parser by tools/gen_package_files.py
_virtxml_cpu() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev="" verb="" ended="" i
    (( COMP_CWORD > 0 )) && prev=${{COMP_WORDS[COMP_CWORD-1]}}
    for (( i = 1; i < COMP_CWORD; i++ )); do
        if [[ -n $verb && ${{COMP_WORDS[i]}} == -- ]]; then ended=1; break; fi  # after --: names, files
        [[ -z $verb ]] && case ${{COMP_WORDS[i]}} in {verb_alternatives}) verb=${{COMP_WORDS[i]}} ;; esac
    done
    COMPREPLY=()
    [[ -z $ended ]] && case "$verb:$prev" in
{chr(10).join(values)}
    esac
    case "$verb" in
{chr(10).join(words)}
    esac
}}
complete -F _virtxml_cpu virtxml-cpu
"""


def _words(text: str) -> str:
    return f'COMPREPLY=($(compgen -W "{text}" -- "$cur"))'


def _reply(action: argparse.Action) -> str:
    """What completes the value of one argument: its choices, files, directories, or nothing."""
    if action.choices:
        return _words(" ".join(str(c) for c in action.choices))
    if action.dest in FILE_DESTS or action.metavar in ("FILE", "PATH"):
        return 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur"))'
    if action.dest in DIR_DESTS:
        return 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur"))'
    return ":"  # a URI, a number, a domain name: nothing to offer


def hook(package_dir: str = SYSTEM_PACKAGE_DIR, lib: tuple[str, ...] = ()) -> str:
    """The hook the package installs: the system interpreter, the system package dir (and where lxml is
    when elsewhere: `lib`), audit mode (the config file's [hook] mode still wins)."""
    lib = tuple(d for d in dict.fromkeys(lib) if d != package_dir)
    return render(template(), SYSTEM_PYTHON, package_dir, HOOK_MODE, None, lib, constants.DIGEST_DIR)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("man", "completion", "hook"))
    ap.add_argument("out", help="file to write, - for stdout")
    ap.add_argument("--docs-uncompressed", action="store_true",
                    help="man: the documentation is installed uncompressed (the RPM)")
    ap.add_argument("--package-dir", default=SYSTEM_PACKAGE_DIR,
                    help=f"hook: the directory holding virtxml_cpu/ (default {SYSTEM_PACKAGE_DIR})")
    ap.add_argument("--lib-dir", action="append", default=[],
                    help="hook: a further directory to import lxml from (repeatable)")
    args = ap.parse_args(argv)
    text = {"man": lambda: manpage(compressed_docs=not args.docs_uncompressed), "completion": completion,
            "hook": lambda: hook(args.package_dir, tuple(args.lib_dir))}[args.what]()
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
        if args.what == "hook":
            os.chmod(args.out, 0o755)
    return 0


if __name__ == "__main__":
    sys.exit(main())

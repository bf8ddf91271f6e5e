"""What the Cockpit page (cockpit/) reads from the command: the records of `audit --follow` (the keys and
the schema version the page is written against), explain of libvirt domains, hook status as JSON, and
the page's files as Cockpit and the Debian package need them, its messages in po/. Uses libvirt's test
driver (no daemon); the page itself runs in tests/lab/test_cockpit.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from virtxml_cpu import cli
from virtxml_cpu.hook import install
from virtxml_cpu.hook import status as hook_status
from virtxml_cpu.live.records import SCHEMA_VERSION

from tests.support import ROOT

COCKPIT = ROOT / "cockpit"
SOURCES = sorted((COCKPIT / "src").glob("*.js*"))
DIST = COCKPIT / "dist"


def page_source() -> str:
    return "\n".join(p.read_text() for p in SOURCES)
NODE = """<node>
<domain type='kvm'><name>web</name><memory unit='MiB'>64</memory><vcpu>2</vcpu>
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os><cpu mode='host-model'/></domain>
<domain type='kvm'><name>db</name><memory unit='MiB'>64</memory><vcpu>2</vcpu>
  <os><type arch='x86_64' machine='pc-i440fx-7.2'>hvm</type></os><features><pvspinlock state='on'/></features></domain>
</node>
"""


@pytest.fixture
def node(tmp_path):
    pytest.importorskip("libvirt")
    path = tmp_path / "node.xml"
    path.write_text(NODE)
    return f"test://{path}"


def lines(capsys) -> tuple[list[dict], str]:
    out = capsys.readouterr()
    return [json.loads(line) for line in out.out.splitlines() if line.strip()], out.err


def test_explain_all_domains_says_what_audit_says(node, capsys):
    assert cli.main(["audit", "--connect", node, "--no-host-probe", "--format", "json"]) == 1
    audit = {r["domain"]: r for r in lines(capsys)[0] if r["record"] == "domain"}
    assert cli.main(["explain", "--connect", node, "--no-host-probe", "--all-domains", "--format", "json"]) == 0
    explained = {r["domain"]: r for r in lines(capsys)[0]}
    assert set(explained) == set(audit) == {"web", "db"}
    for name, x in explained.items():
        assert x["decision"]["action"] == audit[name]["decision"]["action"]
        assert x["decision"]["reason"] == audit[name]["decision"]["reason"]
        assert x["features"]["kvm-pv-unhalt"]["state"] == audit[name]["pv_unhalt"]
    assert explained["web"]["machine"] == "pc-q35-7.2" and explained["web"]["cpu_mode"] == "host-model"
    assert audit["web"]["needs_fix"] and not audit["db"]["needs_fix"]


def test_explain_named_domains_and_unknown_names(node, capsys):
    assert cli.main(["explain", "--connect", node, "--no-host-probe", "--domain", "db", "--format", "json"]) == 0
    records, _ = lines(capsys)
    assert [r["domain"] for r in records] == ["db"] and records[0]["machine"] == "pc-i440fx-7.2"
    assert cli.main(["explain", "--connect", node, "--no-host-probe", "--domain", "nope", "--domain", "web"]) == 2
    out = capsys.readouterr()
    assert out.err.splitlines() == ["virtxml-cpu: nope: Domain not found"] and "== web" in out.out
    assert cli.main(["explain", "--connect", node, "--domain", "web", "some.xml"]) == 2
    assert "not both" in capsys.readouterr().err


def test_explain_domains_of_an_unreachable_libvirt_is_one_line(tmp_path, capsys):
    pytest.importorskip("libvirt")
    uri = f"qemu:///system?socket={tmp_path}/none"
    assert cli.main(["explain", "--connect", uri, "--all-domains", "--format", "json"]) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"virtxml-cpu: cannot connect to {uri}"), err


def test_hook_status_json_is_the_text_status_as_data(tmp_path, capsys):
    hooks = tmp_path / "hooks"
    (hooks / "qemu.d").mkdir(parents=True)
    assert cli.main(["hook", "status", "--hooks-dir", str(hooks), "--format", "json"]) == 1
    rec = json.loads(capsys.readouterr().out)
    assert rec["installed"] is False and rec["hooks"] == [] and rec["hooks_dir"] == str(hooks)
    assert set(rec) == {"libvirt", "daemon", "hooks_dir", "installed", "trusted", "hooks", "qemu"}
    install.install(str(hooks), "queue", None, False)
    code = cli.main(["hook", "status", "--hooks-dir", str(hooks), "--format", "json"])
    rec = json.loads(capsys.readouterr().out)
    assert code == (0 if rec["trusted"] else 1) and rec["trusted"] == (not rec["hooks"][0]["problems"])
    [hook] = rec["hooks"]
    assert rec["installed"] and hook["ours"] and hook["mode"] == "queue" and hook["path"].endswith("qemu.d/virtxml-cpu")
    trusted, text = hook_status.status(str(hooks))
    assert trusted == rec["trusted"] and f"{hook['path']}: installed, mode queue" in text[1]
    (hooks / "qemu").write_text("#!/bin/sh\nexit 0\n")
    rec = hook_status.status_record(str(hooks))
    assert [h["ours"] for h in rec["hooks"]] == [True, False]
    assert f"{hooks}/qemu: present, not ours" in hook_status.status(str(hooks))[1]


# Names a local user may give a domain (libvirt refuses only '/' and newlines): each must reach apply as
# that one name, never as an option, whatever the page puts before it.
HOSTILE_NAMES = ["--all", "--pending", "--connect=qemu+ext:?command=%2Ftmp%2Fp", "--policy=always", "-y",
                 "--diff", "-", "--", "-h", "web"]


def page_commands(js: str | None = None) -> list[tuple[list[str], bool]]:
    """Every virtxml-cpu command line the page (cockpit/src) runs: the `[CMD, "verb", ...]` literal, and whether domain
    names are appended to it (`.concat(names)`). A `[CMD` that is not such a literal fails: every command
    line is checked here."""
    js = page_source() if js is None else js
    found = list(re.finditer(r"\[CMD((?:,\s*\"[^\"]*\")+)\](\.concat\()?", js))
    assert len(found) == js.count("[CMD"), "a command line this test cannot read"
    return [(re.findall(r"\"([^\"]*)\"", m.group(1)), bool(m.group(2))) for m in found]


def problems_with_names(argv: list[str]) -> list[str]:
    """Why `argv + NAMES` is not `argv` applied to exactly NAMES (empty when it is)."""
    parser = cli.build_parser()
    if argv[-1:] != ["--"]:
        return [f"{argv}: no `--` before the names"]
    base = vars(parser.parse_args(argv + ["web"]))
    out = []
    for name in HOSTILE_NAMES:
        try:
            got = vars(parser.parse_args(argv + [name, "web"]))
        except SystemExit:
            out.append(f"{argv} + {name!r}: refused")
            continue
        if got["domains"] != [name, "web"] or {**got, "domains": None} != {**base, "domains": None}:
            out.append(f"{argv} + {name!r}: read as {got}")
    return out


def test_every_command_the_page_runs_is_one_this_cli_accepts():
    commands = page_commands()
    verbs = {c[0] for c, _ in commands}
    assert {"audit", "hook", "apply", "verify"} <= verbs, commands
    parser = cli.build_parser()
    for argv, names in commands:
        args = parser.parse_args(argv + (["web"] if names else []))
        assert args.command == argv[0]
    assert (["audit", "--follow", "--format", "json"], False) in commands and (["verify", "--json", "-"], False) in commands
    assert {tuple(c) for c, names in commands if names} == {("apply", "--diff", "--"), ("apply", "--yes", "--")}


def test_every_command_line_with_names_puts_them_after_a_double_dash():
    """A domain named `--all` or `--connect=qemu+ext:?command=...` is a name to apply, not an option."""
    with_names = [argv for argv, names in page_commands() if names]
    assert with_names
    for argv in with_names:
        assert problems_with_names(argv) == []


def test_the_check_catches_names_without_a_double_dash():
    """What the page ran before: the names straight after the options, `--all` then read as --all."""
    old = 'run([CMD, "apply", "--diff"].concat(names), LIBVIRT); run([CMD, "apply", "--yes"].concat(names))'
    [(diff, with_diff), (yes, with_yes)] = page_commands(old)
    assert with_diff and with_yes
    assert problems_with_names(diff) == [f"{diff}: no `--` before the names"]
    # and without the first check, the parser reads those names as options
    parser = cli.build_parser()
    assert parser.parse_args(yes + ["--all", "web"]).all
    assert parser.parse_args(yes + ["--connect=qemu+ext:?command=%2Ftmp%2Fp"]).connect == \
        ["qemu+ext:?command=%2Ftmp%2Fp"]
    with pytest.raises(AssertionError, match="cannot read"):  # a command line built from a variable
        page_commands('run([CMD, "apply", mode].concat(names))')


def test_page_files_are_what_cockpit_and_the_package_need():
    html = (COCKPIT / "index.html").read_text()
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
    assert scripts and all('src="' in attrs and not body.strip() for attrs, body in scripts), "inline script"
    assert '<script src="../base1/cockpit.js"></script>' in html  # Cockpit's own, not bundled
    assert '<script src="po.js"></script>' in html  # Cockpit serves po.LANG.js for it
    assert re.search(r"<title translate[^>]*>[^<]+</title>", html)
    assert not re.search(r"\son\w+=", html), "inline event handler (Cockpit's CSP blocks it)"
    manifest = json.loads((COCKPIT / "manifest.json").read_text())
    assert manifest["menu"]["index"]["label"]
    assert {"path-exists": "/usr/bin/virtxml-cpu"} in manifest["conditions"]
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sorted(r for r in refs if not r.startswith("../base1/")) == ["index.css", "index.js", "po.js"]
    installed = [line.split() for line in (ROOT / "debian" / "cockpit-virtxml-cpu.install").read_text().splitlines()]
    assert installed == [["cockpit/dist/*", "usr/share/cockpit/virtxml-cpu/"]]  # the bundle, not node_modules
    lock = json.loads((COCKPIT / "package-lock.json").read_text())
    package = json.loads((COCKPIT / "package.json").read_text())
    for name, version in {**package["dependencies"], **package["devDependencies"]}.items():
        assert lock["packages"][f"node_modules/{name}"]["version"] == version, name  # pinned, exactly


def test_the_built_page_is_what_the_package_ships():
    if not (DIST / "index.js.gz").is_file():
        pytest.skip("!!! cockpit/dist is not built (make cockpit): the bundle's files are NOT checked")
    assert sorted(p.name for p in DIST.iterdir()) == sorted(
        ["index.html", "manifest.json", "index.js.gz", "index.css.gz", "index.js.LEGAL.txt"]
        + [f"po.{p.stem}.js.gz" for p in (ROOT / "po").glob("*.po")])
    import gzip

    po = gzip.decompress((DIST / "po.de.js.gz").read_bytes()).decode()
    assert po.startswith("cockpit.locale({") and '"language":"de"' in po and '"Guests":[null,"Gäste"]' in po
    js = gzip.decompress((DIST / "index.js.gz").read_bytes()).decode()
    assert '"--follow"' in js and "process.env" not in js  # the page's code, built for production
    assert "cockpit.locale" not in js and "function cockpit" not in js  # Cockpit's cockpit.js is not bundled


def test_the_page_reads_only_keys_the_records_have():
    """The typed contract: every key of a domain record the page reads (row.KEY, r.KEY) is one audit's
    JSON domain record has, every key of its details (x.KEY) one `--details` gives, and the schema the
    page checks is live/records.py's."""
    pytest.importorskip("libvirt")
    src = page_source()
    assert re.search(r"const SCHEMA = (\d+);", src).group(1) == str(SCHEMA_VERSION)
    assert "fixable" in re.findall(r"\brow\.(\w+)", src)  # the fix button follows the CLI's word
    assert not re.search(r"needs_fix\s*&&\s*!", src), "the page decides fixable itself"
    out = subprocess.run([sys.executable, "-m", "virtxml_cpu", "audit", "--connect", "test:///default", "--no-host-probe",
                          "--format", "json", "--details"], capture_output=True, text=True)
    records = [json.loads(line) for line in out.stdout.splitlines()]
    domain = next(r for r in records if r["record"] == "domain")
    assert set(re.findall(r"\brow\.(\w+)", src)) - {"error"} <= set(domain), \
        set(re.findall(r"\brow\.(\w+)", src)) - set(domain)
    assert set(re.findall(r"\bx\.(\w+)", src)) <= set(domain["details"])
    assert records[-1]["version"] == SCHEMA_VERSION


def test_the_messages_are_in_the_pot_and_german():
    """po/virtxml-cpu.pot is what `make pot` makes of the sources now, and de.po translates every message."""
    if not shutil.which("xgettext") or not shutil.which("msgcat"):
        pytest.skip("!!! xgettext/msgcat missing (Debian: gettext): the message catalogue is NOT checked")
    made = subprocess.run(["make", "-s", "-C", str(ROOT), "--no-print-directory", "-W", "cockpit/src/app.jsx",
                           "--dry-run", "pot"], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr

    def ids(path) -> set[str]:
        text = subprocess.run(["msgcat", "--no-wrap", str(path)], capture_output=True, text=True, check=True).stdout
        return set(json.loads(m) for m in re.findall(r'^msgid (".*")$', text, re.M)) - {""}

    pot = ids(ROOT / "po" / "virtxml-cpu.pot")
    used = set()
    for m in re.finditer(r'\b(?:_|gettext)\("((?:[^"\\]|\\.)*)"\)', page_source()):
        used.add(json.loads(f'"{m.group(1)}"'))
    for m in re.finditer(r'ngettext\(\s*"((?:[^"\\]|\\.)*)"', page_source()):
        used.add(json.loads(f'"{m.group(1)}"'))
    assert used <= pot, used - pot
    assert "CPU paravirt" in pot  # the title and the menu label
    assert ids(ROOT / "po" / "de.po") == pot
    stats = subprocess.run(["msgfmt", "--check", "--statistics", "-o", "/dev/null", str(ROOT / "po" / "de.po")],
                           capture_output=True, text=True)
    assert stats.returncode == 0 and "untranslated" not in stats.stderr and "fuzzy" not in stats.stderr, stats.stderr

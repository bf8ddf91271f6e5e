"""The Debian package's derived files: the man page and the bash completion follow the live parser, the
config template and the man page know every config key, the systemd units verify and are sandboxed.

The generators run with Debian's /usr/bin/python3 and its python3-argparse-manpage,
as debian/rules runs them (`make deb` installs those as root)."""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from virtxml_cpu import __version__, constants
from virtxml_cpu.core import config, toml_read
from virtxml_cpu.hook import install
from virtxml_cpu.cli import build_parser

from tests.support import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import gen_package_files as gen  # noqa: E402

SYSTEM_PYTHON = "/usr/bin/python3"
UNITS = ROOT / "contrib" / "systemd"


def _system_python_has(*modules: str) -> bool:
    return Path(SYSTEM_PYTHON).exists() and subprocess.run(
        [SYSTEM_PYTHON, "-c", "import " + ", ".join(modules)], capture_output=True).returncode == 0


needs_debian_libs = pytest.mark.skipif(
    not _system_python_has("build_manpages", "lxml"),
    reason="GENERATOR TESTS SKIPPED: /usr/bin/python3 lacks python3-argparse-manpage or python3-lxml "
           " (apt-get install them, or run `make deb` as root)")


def generate(what: str, *options: str) -> str:
    r = subprocess.run([SYSTEM_PYTHON, str(ROOT / "tools" / "gen_package_files.py"), what, "-", *options],
                       capture_output=True, text=True, timeout=60, check=True)
    return r.stdout


def walk(parser: argparse.ArgumentParser, path=()):
    """(verb path, parser) for the parser and every subparser, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, path + (name,))


@pytest.fixture(scope="module")
def man_text() -> str:
    """The man page as a reader sees it (roff escapes undone)."""
    return generate("man").replace("\\-", "-").replace("\\&", "").replace("\\e", "\\")


@needs_debian_libs
def test_man_page_names_every_verb_and_option_of_the_live_parser(man_text):
    assert man_text.startswith('.TH VIRTXML-CPU 8 ')
    seen = 0
    for path, parser in walk(build_parser()):
        if path:
            assert f"OPTIONS 'virtxml-cpu {' '.join(path)}'" in man_text, path
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help") and action.help != argparse.SUPPRESS:  # older names stay hidden
                    assert re.search(rf"\\fB{re.escape(option)}\\fR", man_text), (path, option)
                    seen += 1
            for choice in (action.choices or ()) if action.metavar is None else ():  # shown as {a,b,...}
                assert str(choice) in man_text, (path, choice)
    assert seen > 60


@needs_debian_libs
def test_man_page_has_exit_status_config_keys_and_files(man_text):
    status = man_text.split(".SH EXIT STATUS", 1)[1].split(".SH ", 1)[0]
    assert re.findall(r"\\fB(\d)\\fR", status) == ["0", "1", "2", "3"]
    conf = man_text.split(".SH CONFIGURATION", 1)[1].split(".SH ", 1)[0]
    keys = set(config.KEYS) - {"hook"} | {f"hook.{k}" for k in config.HOOK_KEYS}
    assert set(re.findall(r"\\fB([a-z_.]+)\\fR", conf)) == keys
    for path in (constants.CONFIG_PATH, "/etc/libvirt/hooks/qemu.d/virtxml-cpu", constants.SPOOL_DIR):
        assert path in man_text.split(".SH FILES", 1)[1]


def test_every_config_key_is_documented_once():
    keys = set(config.KEYS) - {"hook"} | {f"hook.{k}" for k in config.HOOK_KEYS}
    assert [k for k, _ in gen.CONFIG_KEYS] == sorted(keys, key=[k for k, _ in gen.CONFIG_KEYS].index)
    assert {k for k, _ in gen.CONFIG_KEYS} == keys


def test_config_template_is_all_comments_and_uncommented_sets_every_key():
    text = (ROOT / "contrib" / "config.toml").read_text()
    assert config.parse(text, "template") == config.Config(path="template")  # commented: the defaults
    uncommented = re.sub(r"^#(\w+ = |\[hook\]$)", r"\1", text, flags=re.M)
    data = toml_read.toml_reader().loads(uncommented)
    assert set(data) == set(config.KEYS) and set(data["hook"]) == set(config.HOOK_KEYS)
    cfg = config.parse(uncommented, "template")
    assert (cfg.policy, cfg.style, cfg.hook_mode, cfg.spool, cfg.syslog_socket) == (
        "compat", "pvspinlock", "audit", constants.SPOOL_DIR, "/dev/log")


def complete(script: str, *words: str) -> list[str]:
    """COMPREPLY of the generated completion for the command line `words` (the last one being typed)."""
    words_sh = " ".join(shlex.quote(w) for w in ("virtxml-cpu",) + words)
    prog = (f"source {shlex.quote(script)}\nCOMP_WORDS=({words_sh})\nCOMP_CWORD={len(words)}\n"
            f"COMP_LINE={shlex.quote('virtxml-cpu ' + ' '.join(words))}\nCOMP_POINT=${{#COMP_LINE}}\n"
            "_virtxml_cpu virtxml-cpu \"${COMP_WORDS[COMP_CWORD]}\" \"${COMP_WORDS[COMP_CWORD-1]}\"\n"
            "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return sorted(line for line in r.stdout.splitlines() if line)


@pytest.fixture(scope="module")
def completion_script(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("completion") / "virtxml-cpu"
    path.write_text(gen.completion())
    return str(path)


def test_completion_completes_verbs_options_and_choices(completion_script):
    verbs = sorted(name for path, _ in walk(build_parser()) if len(path) == 1 for name in path)
    assert complete(completion_script, "") == verbs
    assert complete(completion_script, "au") == ["audit"]
    assert complete(completion_script, "audit", "--format", "") == ["json", "prometheus", "table"]
    assert complete(completion_script, "audit", "--format", "p") == ["prometheus"]
    assert complete(completion_script, "rewrite", "--pol") == ["--policy"]
    assert complete(completion_script, "explain", "--policy", "") == ["always", "compat", "never", "numa"]
    assert complete(completion_script, "hook", "") == ["install", "status", "uninstall"]
    assert "--qemu-d" in complete(completion_script, "hook", "--")
    assert complete(completion_script, "audit", "--connect", "") == []  # a URI: nothing to offer
    assert complete(completion_script, "--") == ["--help", "--version"]


def test_completion_completes_file_arguments_with_files(completion_script, tmp_path):
    (tmp_path / "guest-one.xml").write_text("<domain/>")
    prefix = str(tmp_path / "guest-")
    assert complete(completion_script, "explain", prefix) == [prefix + "one.xml"]
    assert complete(completion_script, "audit", "-o", prefix) == [prefix + "one.xml"]
    assert complete(completion_script, "hook", "--hooks-dir", str(tmp_path) + "/gue") == []


def test_completion_offers_every_option_of_every_verb(completion_script):
    for path, parser in walk(build_parser()):
        offered = set(complete(completion_script, *path, "-"))
        assert offered == {o for a in parser._actions for o in a.option_strings}, path


def test_installed_hook_runs_the_system_python_on_the_system_package():
    text = gen.hook()
    settings = install.installed_settings(text)
    assert text.startswith("#!/bin/sh\n") and settings["PYTHON"] == "/usr/bin/python3"
    assert settings["PACKAGE_DIR"] == "/usr/lib/python3/dist-packages" and settings["MODE"] == "audit"
    assert settings["CONFIG"] == "" and settings["LIB_DIRS"] == ""  # the default config; lxml beside the package
    assert settings["DIGEST_DIR"] == "/var/lib/virtxml-cpu/decisions"


def unit(name: str) -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    for line in (UNITS / name).read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            k, v = line.split("=", 1)
            keys.setdefault(k, []).append(v)
    return keys


def test_audit_service_writes_node_exporters_textfile_dir_and_is_sandboxed():
    svc = unit("virtxml-cpu-audit.service")
    argv = shlex.split(svc["ExecStart"][0])
    assert argv[:4] == ["/usr/bin/virtxml-cpu", "audit", "--format", "prometheus"]
    assert argv[4:] == ["-o", f"{gen.TEXTFILE_DIR}/virtxml-cpu.prom"]
    assert set(svc["ReadWritePaths"][0].split()) == {gen.SPOOL_DIR, gen.TEXTFILE_DIR}
    assert svc["ConditionPathIsDirectory"] == [gen.TEXTFILE_DIR]
    assert "OnUnitActiveSec" in unit("virtxml-cpu-audit.timer")
    watch = unit("virtxml-cpu-watch.service")
    assert watch["ReadWritePaths"] == [gen.SPOOL_DIR] and watch["ExecStart"][0].startswith("/usr/bin/virtxml-cpu ")
    for keys in (svc, watch):
        for setting, value in (("ProtectSystem", "strict"), ("ProtectHome", "yes"), ("PrivateTmp", "yes"),
                               ("NoNewPrivileges", "yes"), ("DevicePolicy", "closed")):
            assert keys[setting] == [value], setting


@pytest.mark.skipif(not shutil.which("systemd-analyze"),
                    reason="UNIT VERIFY SKIPPED: no systemd-analyze (apt-get install systemd)")
def test_units_pass_systemd_analyze_verify(tmp_path):
    """Offline verify; the command path points at a stand-in, since /usr/bin/virtxml-cpu exists only
    where the package is installed (the lab test verifies the installed units unchanged)."""
    stand_in = tmp_path / "virtxml-cpu"
    stand_in.symlink_to(shutil.which("true"))
    for path in UNITS.iterdir():
        (tmp_path / path.name).write_text(path.read_text().replace("/usr/bin/virtxml-cpu", str(stand_in)))
    r = subprocess.run(["systemd-analyze", "verify", "--man=no",
                        *sorted(str(tmp_path / p.name) for p in UNITS.iterdir())],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr


def test_package_version_is_the_python_version():
    changelog = (ROOT / "debian" / "changelog").read_text().splitlines()[0]
    assert re.match(rf"virtxml-cpu \({re.escape(__version__)}\) ", changelog), changelog
    pyproject = toml_read.toml_reader().loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["version"] == __version__


@pytest.mark.parametrize("argv", [["audit", "--connect", "qemu:///system", "--connect", "qemu+ssh://h/system"],
                                  ["apply", "--all", "--dry-run"], ["watch"]])
def test_live_verbs_without_the_libvirt_binding_say_so_in_one_line(argv):
    """A host with the package but not python3-libvirt (it is only recommended)."""
    code = ("import sys; sys.modules['libvirt'] = None\n"
            f"from virtxml_cpu.cli import main; sys.exit(main({argv!r}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 3 and r.stdout == "", r
    assert r.stderr.splitlines() == ["virtxml-cpu: the libvirt Python binding is missing (Debian: apt-get install "
                                     "python3-libvirt; pip: pip install 'virtxml-cpu[libvirt]')"]


def test_completion_offers_no_option_after_the_double_dash(completion_script, tmp_path):
    """After `--` every word is a name (or a file): completing one as an option would turn a name typed
    there into one."""
    assert complete(completion_script, "apply", "--yes", "--", "--") == []
    assert complete(completion_script, "audit", "--", "--pol") == []
    assert "always" not in complete(completion_script, "explain", "--", "--policy", "")  # a file named --policy
    (tmp_path / "--guest.xml").write_text("<domain/>")
    assert complete(completion_script, "explain", "--", str(tmp_path / "--gu")) == [str(tmp_path / "--guest.xml")]
    assert complete(completion_script, "apply", "--", "web01", "--co") == []
    assert complete(completion_script, "apply", "--con") == ["--config", "--connect"]  # before it: options


def test_the_rpms_hook_imports_lxml_from_the_arch_specific_site_packages():
    """Fedora and openSUSE install lxml (compiled) under lib64/, the package (pure Python) under lib/: the
    hook's isolated interpreter has no site-packages on its path, so both are named."""
    text = gen.hook("/usr/lib/python3.13/site-packages", ("/usr/lib64/python3.13/site-packages",))
    settings = install.installed_settings(text)
    assert settings["PACKAGE_DIR"] == "/usr/lib/python3.13/site-packages"
    assert settings["LIB_DIRS"] == "/usr/lib64/python3.13/site-packages"
    same = install.installed_settings(gen.hook("/usr/lib/python3.11/site-packages", ("/usr/lib/python3.11/site-packages",)))
    assert same["LIB_DIRS"] == ""  # one directory for both (Debian's layout, or a 32-bit libdir)


@needs_debian_libs
def test_the_rpms_man_page_names_the_documentation_as_installed_uncompressed():
    text = generate("man", "--docs-uncompressed")
    assert "/usr/share/doc/virtxml\\-cpu/install.md\\fR" in text and ".md.gz" not in text and "zless" not in text
    assert ".md.gz" in generate("man")

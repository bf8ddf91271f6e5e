"""The config under every TOML reader toml_read.toml_reader may pick: tomllib (3.11+), tomli (its package,
below 3.11), toml 0.10 (Debian 11's only one). A config settles to the same settings, or is refused,
whichever reads it; where toml 0.10 cannot be trusted it refuses loudly, never reads something else."""

from __future__ import annotations

import importlib
import importlib.util

import pytest

from virtxml_cpu.core import config, toml_read
from virtxml_cpu.errors import BadInput, EnvironmentProblem

from tests.support import ROOT

REFERENCE = next((n for n in ("tomllib", "tomli") if importlib.util.find_spec(n)), None)
HAS_TOML = importlib.util.find_spec("toml") is not None
need_both = pytest.mark.skipif(REFERENCE is None or not HAS_TOML,
                               reason="SKIPPED LOUDLY: needs tomllib or tomli, and toml (pip install tomli toml)")

# Not the plain way (toml_read.plain_toml leaves each to the TOML reader), each read the same by every reader.
NOT_PLAIN = [
    "policy = 'never'\n",
    '[ hook ]\nmode = "enforce"\n',
    'hook.mode = "queue"\nhook.spool = "/var/lib/x"\n',
    'hook = { mode = "audit", syslog_socket = "/dev/log" }\n',
    '"policy" = "numa"\n',
    'qemu_version = "8.2.\\u0032"\n',
    "policy = 'always' # a 'quoted' note\n",
    "timeout = 1_0\nhost_timeout = 1e2\n",
    "[hook]\nspool = '/var/lib/virtxml-cpu/pending'  # literal\n",
]
INVALID = [
    "timeout = 30\ntimeout = 5\n",
    '[hook]\nmode = "audit"\nmode = "enforce"\n',
    '[hook]\nmode = "audit"\n[hook]\nspool = "/x"\n',
    '[hook]\nmode = "audit"\n[[hook]]\n',  # toml 0.10 fails with AttributeError here
    '[hook]\n[[hook]]\n"policy" = 30\n',
    "timeout = - 1\n",  # toml 0.10 takes it for -1
    'policy = "a" "b"\n',
    "policy = compat\n",
    "timeout = 010\n",
    'policy = "numa"\npolicy.x = 1\n',
    "policy = 'a'b'\n",
]
# Valid TOML that toml 0.10 misreads (it drops a multi-line string followed by a comment, keeps blanks around
# a key's dot and a quoted key's escapes, fails on a comma in a string of an inline table and on `t=0x10`):
# refused under every reader (core/toml_check.py), so that a config means the same on every host.
REFUSED_UNDER_TOML = ['[hook]\nspool = """/var/lib/\nx""" # c\n', "policy = '''never'''\n",
                      'policy = """never""" # on one line\n',
                      'hook .mode = "queue"\n', '"pol\\u0069cy" = "never"\n',
                      'hook = { mode = "audit", spool = ",/x" }\n', "timeout=0x10\n"]


@pytest.fixture
def outcome(monkeypatch):
    """What config.parse makes of a text with the TOML reader named: the settings, or (BadInput, lines - 1)."""
    def read(text: str, reader: str):
        monkeypatch.setattr(toml_read, "toml_reader", lambda: importlib.import_module(reader))
        try:
            return config.parse(text, "c.toml")
        except BadInput as e:
            return BadInput, str(e).count("\n")
    return read


@need_both
@pytest.mark.parametrize("text", NOT_PLAIN + INVALID)
def test_every_reader_settles_a_config_the_same_or_refuses_it(text, outcome):
    assert toml_read.plain_toml(text) is None  # the TOML reader's to read
    assert outcome(text, "toml") == outcome(text, REFERENCE)
    assert (outcome(text, REFERENCE) == (BadInput, 0)) == (text in INVALID)


@need_both
@pytest.mark.parametrize("text", REFUSED_UNDER_TOML)
def test_what_toml_010_misreads_is_refused_in_one_line_under_every_reader(text, outcome):
    assert isinstance(importlib.import_module(REFERENCE).loads(text), dict)  # valid TOML
    assert outcome(text, "toml") == outcome(text, REFERENCE) == (BadInput, 0)


@need_both
def test_the_config_template_uncommented_reads_the_same_under_toml():
    import re

    text = re.sub(r"^#(\w+ = |\[hook\]$)", r"\1", (ROOT / "contrib" / "config.toml").read_text(), flags=re.M)
    assert importlib.import_module("toml").loads(text) == importlib.import_module(REFERENCE).loads(text) != {}


def test_without_a_toml_reader_the_plain_way_is_read_and_the_rest_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(toml_read, "toml_reader", lambda: None)
    assert config.parse('policy = "never"\n[hook]\nmode = "enforce"\n', "c.toml").hook_mode == "enforce"
    with pytest.raises(EnvironmentProblem, match="no TOML reader: install python3-tomli") as e:
        config.parse("policy = 'never'\n", "c.toml")
    assert "\n" not in str(e.value)


def test_the_build_has_one_name():
    """No release ever read another name for qemu_build: one that is not a setting is refused."""
    from virtxml_cpu.core import config as config_file
    from virtxml_cpu.errors import BadInput
    assert config_file.parse('qemu_build = "rhel"\n').qemu_build == "rhel"
    with pytest.raises(BadInput, match=r"unknown setting\(s\) qemu_flavour"):
        config_file.parse('qemu_flavour = "rhel"\n')

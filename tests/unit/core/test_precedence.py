"""Which value wins: each rule of core/precedence.py through the shells that use it (the pipeline, the hook,
the live verbs' deadlines), and the docs' lists written from its tuples, with no numbered rank left to drift.
The QEMU build and release through every shell: tests/unit/host/test_sources.py."""

from __future__ import annotations

import io
import re
import sys

import pytest

from virtxml_cpu.constants import DEFAULT_STYLE
from virtxml_cpu.core import precedence
from virtxml_cpu.core.config import Config, parse
from virtxml_cpu.core.hostfacts import HostFacts
from virtxml_cpu.core.pipeline import process
from virtxml_cpu.hook import evaluate

from tests.support import ROOT, Capture

sys.path.insert(0, str(ROOT / "tools"))
import gen_precedence as gen  # noqa: E402

UP = HostFacts(qemu_version=(7, 2, 0), qemu_build="upstream", build_source="test")
OWN = "<metadata><v:cpu xmlns:v='urn:virtxml-cpu:domain:1' policy='{}'/></metadata>"


def domain(metadata: str = "") -> bytes:
    return ("<domain type='kvm'><name>g</name><vcpu>2</vcpu><os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type>"
            f"</os><cpu mode='custom'><model>Skylake-Client</model></cpu>{metadata}</domain>").encode()


@pytest.mark.parametrize("metadata,option,config,want", [
    ("never", "always", "numa", ("never", "domain <metadata>")),
    (None, "always", "numa", ("always", "command line")),
    (None, None, "numa", ("numa", "config file")),
    (None, None, None, ("compat", "default")),
])
def test_the_policy_is_the_first_given_and_the_pipeline_says_where_it_came_from(metadata, option, config, want):
    assert precedence.policy(metadata, option, config) == want
    o = process(domain(OWN.format(metadata) if metadata else ""), "g.xml", UP, Config(policy=config), option,
                render=False)
    assert (o.decision.policy, o.policy_source) == want


def test_metadata_that_names_no_policy_still_wins_and_decides_to_keep():
    o = process(domain(OWN.format("sometimes")), "g.xml", UP, Config(policy="always"), "always", render=False)
    assert (o.decision.rule, o.policy_source, o.changed) == ("metadata-invalid", "domain <metadata>", False)


def test_the_style_comes_from_the_option_then_the_config_then_the_default():
    assert precedence.style("cpu-feature", "pvspinlock") == ("cpu-feature", "command line")
    assert precedence.style(None, "cpu-feature") == ("cpu-feature", "config file")
    assert precedence.style(None, None) == (DEFAULT_STYLE, "default")
    assert parse("", "c").style is None and parse('style = "cpu-feature"\n', "c").style == "cpu-feature"
    written = process(domain(), "g.xml", UP, Config(style="cpu-feature")).output.decode()
    assert "<feature policy='require' name='kvm_pv_unhalt'/>" in written and "pvspinlock" not in written
    written = process(domain(), "g.xml", UP, Config(style="cpu-feature"), cli_style="pvspinlock").output.decode()
    assert "<pvspinlock state='on'/>" in written
    assert process(domain(), "g.xml", UP, Config(), render=False).style == DEFAULT_STYLE


@pytest.mark.parametrize("config_mode,installed,want", [
    ("enforce", "queue", "enforce"), (None, "queue", "queue"), (None, None, "audit")])
def test_the_hooks_mode_is_the_configs_then_the_installed_one_then_audit(tmp_path, config_mode, installed, want):
    assert precedence.hook_mode(config_mode, installed).value == want
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[hook]\nspool = "{tmp_path}/spool"\n' + (f'mode = "{config_mode}"\n' if config_mode else ""))
    log = Capture()
    evaluate.run(["g", "prepare", "begin", "-"], mode=installed, config_path=str(cfg), log=log,
                 stdin=io.BytesIO(domain()))
    assert f" mode={want} " in log.lines[-1], log.lines[-1]


def test_the_timeouts_come_from_the_option_then_the_config_and_the_host_gets_ten_times_the_peer():
    def seconds(option, cfg):
        return tuple(c.value for c in precedence.timeouts(option, cfg))

    assert seconds(None, Config()) == (30.0, 300.0)
    assert seconds(5.0, Config(timeout=7.0)) == (5.0, 50.0)
    assert seconds(None, Config(timeout=7.0, host_timeout=20.0)) == (7.0, 20.0)
    peer, host = precedence.timeouts(None, Config(timeout=7.0))
    assert (peer.source, host.source) == ("config file", "timeout")


def test_host_fact_sources_are_taken_by_name_and_an_unknown_name_is_refused():
    assert precedence.in_order({"local QEMU": ["l"], "command line": ["c"], "libvirt": ["v1", "v2"]}) == \
        ["c", "v1", "v2", "l"]
    with pytest.raises(KeyError, match="not a source of host facts: the cache"):
        precedence.in_order({"the cache": ["x"]})


def test_the_docs_lists_are_written_from_the_tuples(regen):
    """docs/configuration.md and docs/qemu-build.md hold what tools/gen_precedence.py writes (--regen
    rewrites them); each source of each rule appears there in its order."""
    for path, text in gen.pages().items():
        if regen:
            path.write_text(text)
        assert path.read_text() == text, f"{path.name}: run python3 tools/gen_precedence.py"
    page = (ROOT / "docs" / "qemu-build.md").read_text()
    assert re.findall(r"^\d\. \*\*(.*?)\*\*", page, re.M) == [s.title for s in precedence.HOST_FACT_SOURCES]
    table = (ROOT / "docs" / "configuration.md").read_text()
    for name, order in precedence.RULES.items():
        row = next(line for line in table.splitlines() if line.startswith(f"| {name} |"))
        places = [row.index(s.title) for s in order]
        assert places == sorted(places), row


def test_a_block_without_its_markers_is_an_error_not_a_silent_skip():
    with pytest.raises(ValueError, match="no block"):
        gen.rewritten("no markers here\n", "host fact sources", "x")


def test_no_numbered_rank_is_left_to_cross_reference():
    """An order is referred to by its sources' names; "rank 4" drifted from the list it pointed into."""
    texts = [*ROOT.joinpath("docs").glob("*.md"), *ROOT.joinpath("virtxml_cpu").rglob("*.py"),
             *(p for p in ROOT.joinpath("tests").rglob("*.py") if p.name != "test_precedence.py")]
    pattern = re.compile(r"\branks?( \w+){0,3} \d\b")  # rank 4, ranks the QEMU at 5
    found = [f"{p.relative_to(ROOT)}: {line.strip()}" for p in texts for line in p.read_text().splitlines()
             if pattern.search(line)]
    assert found == []

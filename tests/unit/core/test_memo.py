"""The pipeline's one memo: keyed by the facts that decide (never an object's identity), shared by a
template's clones, and resolution, decision and rendering keep no state of their own."""

from __future__ import annotations

import json
import types

import pytest
from hypothesis import given, settings, strategies as st

from virtxml_cpu.constants import DEFAULT_STYLE
from virtxml_cpu.core import decision, domain, pipeline, precedence, resolve as core_resolve
from virtxml_cpu.render import explain
from virtxml_cpu.core.config import Config
from virtxml_cpu.core.hostfacts import HostFacts, combine
from virtxml_cpu.core.memo import FrozenDict, Memo
from virtxml_cpu.cli.explain import json_line
from virtxml_cpu.core.pipeline import process
from virtxml_cpu.xml.parse import parse_domain_lean

from tests.support import FIXTURES, ROOT, recorded_host

SOURCES = sorted(p for d in (FIXTURES, ROOT / "examples") for p in d.glob("*.xml"))


def clone(data: bytes, n: int) -> bytes:
    """The same definition under another name and uuid (what a template's clones differ in)."""
    facts = domain.extract(parse_domain_lean(data, "x"))
    out = data.replace(f"<name>{facts.name}</name>".encode(), f"<name>clone-{n}</name>".encode(), 1)
    if facts.uuid:
        out = out.replace(facts.uuid.encode(), f"00000000-0000-4000-8000-{n:012d}".encode(), 1)
    return out


@pytest.fixture
def calls(monkeypatch):
    """A fresh memo, and how often the pipeline asked resolve.resolve and decision.decide."""
    monkeypatch.setattr(pipeline, "MEMO", Memo())
    counted = {"resolve": 0, "decide": 0}
    resolve, decide = core_resolve.resolve, decision.decide

    def counting_resolve(*a):
        counted["resolve"] += 1
        return resolve(*a)

    def counting_decide(*a):
        counted["decide"] += 1
        return decide(*a)

    monkeypatch.setattr(core_resolve, "resolve", counting_resolve)
    monkeypatch.setattr(decision, "decide", counting_decide)
    return counted


def test_equal_facts_share_one_answer_whoever_built_them(calls):
    """Two host facts built separately but equal, and a clone with its own name and uuid: one resolution,
    one decision. Each outcome keeps its own name and uuid."""
    data = (FIXTURES / "rhel9-q35.xml").read_bytes()
    first = process(data, "a.xml", recorded_host(), Config(), render=False)
    again = process(clone(data, 1), "b.xml", recorded_host(), Config(), render=False)
    assembled = process(clone(data, 2), "c.xml", combine([recorded_host()]), Config(), render=False)
    assert calls == {"resolve": 1, "decide": 1} and assembled.decision == first.decision
    assert again.resolution.facts.name == "clone-1" and first.resolution.facts.name != "clone-1"
    assert again.resolution.facts.uuid == "00000000-0000-4000-8000-000000000001"
    assert again.resolution.features == first.resolution.features and again.decision == first.decision


def test_every_fact_that_decides_is_in_the_key(calls):
    data = (FIXTURES / "rhel9-q35.xml").read_bytes()
    host = recorded_host()
    base = process(data, "a.xml", host, Config(), render=False)
    old_qemu = process(data, "a.xml", host._replace(qemu_version=(2, 10)), Config(), render=False)
    assert calls["resolve"] == 2 and old_qemu.resolution.features != base.resolution.features
    never = process(data, "a.xml", host, Config(), "never", render=False)
    assert calls == {"resolve": 2, "decide": 3} and never.decision.rule == "policy-never"
    changed = data.replace(b"machine='pc-q35-rhel9.6.0'", b"machine='pc-q35-7.2'")
    assert changed != data
    other = process(changed, "a.xml", host, Config(), render=False)
    assert calls["resolve"] == 3 and other.resolution.machine.name == "pc-q35-7.2"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_a_kept_answer_is_the_answer_computed_afresh(path, calls, host):
    """Warm the memo with a clone, then the document itself: what it is given equals what resolve and
    decide compute for it directly (name and uuid included)."""
    data = path.read_bytes()
    process(clone(data, 7), "clone.xml", host, Config(), render=False)
    kept = process(data, path.name, host, Config(), render=False)
    facts = domain.extract(parse_domain_lean(data, path.name))
    fresh = core_resolve.resolve(facts, host)
    assert kept.resolution == fresh
    if kept.decision.rule != "metadata-invalid":
        chosen, _ = precedence.policy(facts.override_policy, None, None)
        assert kept.decision == decision.decide(fresh, chosen, DEFAULT_STYLE)
    assert json.loads(json_line(kept)) == explain.to_json(kept) == json.loads(explain.to_json_line(kept))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_name_and_uuid_decide_nothing(path, host):
    """What lets the key drop them: resolve and decide answer the same whatever the name and uuid."""
    facts = domain.extract(parse_domain_lean(path.read_bytes(), path.name))
    other = facts._replace(name="someone-else", uuid="00000000-0000-4000-8000-000000000009")
    a, b = core_resolve.resolve(facts, host), core_resolve.resolve(other, host)
    assert a._replace(facts=other) == b
    assert decision.decide(a, "compat") == decision.decide(b, "compat")


def _state(module) -> dict:
    """The size of every module-level container, and of each container an object there holds."""
    out = {}
    for k, v in vars(module).items():
        if isinstance(v, (types.ModuleType, type)) or callable(v):
            continue
        if isinstance(v, (dict, list, set)):
            out[k] = len(v)
        for a, w in getattr(v, "__dict__", {}).items():
            if isinstance(w, (dict, list, set)):
                out[f"{k}.{a}"] = len(w)
    return out


def test_resolution_policy_and_renderer_keep_no_state(host):
    """Renderers only render: rendering every fixture (after deciding it) changes no module's containers
    and leaves the pipeline's memo as deciding left it."""
    before = {m.__name__: _state(m) for m in (core_resolve, decision, explain)}
    for path in SOURCES:
        o = process(clone(path.read_bytes(), 3), path.name, host, Config(), render=False)
        kept = len(pipeline.MEMO)
        explain.to_json_line(o), explain.table(o), explain.own_json(o), explain.resolution_json(o)
        assert len(pipeline.MEMO) == kept
    assert {m.__name__: _state(m) for m in (core_resolve, decision, explain)} == before


def test_assembled_host_facts_are_a_hashable_value():
    host = combine([recorded_host()])
    assert isinstance(host.cpuid, FrozenDict) and hash(host) == hash(combine([recorded_host()]))
    with pytest.raises(TypeError):
        host.cpuid[(1, "eax")] = 0
    with pytest.raises(TypeError):
        host.aliases.update(pc="x")
    assert pipeline.host_key(recorded_host()) == pipeline.host_key(host)  # plain dicts are frozen for the key
    assert hash(pipeline.host_key(HostFacts())) == hash(pipeline.host_key(HostFacts()))


def test_the_memo_is_bounded_and_never_wrong_when_it_starts_over():
    memo = Memo(limit=2)
    assert [memo.get(k, lambda k=k: k * 10) for k in (1, 2, 3, 1)] == [10, 20, 30, 10]
    assert len(memo) <= 2


def test_the_lean_parse_keeps_all_but_the_devices_and_each_emulator_across_chunks():
    """Children of the domain's <devices> are dropped while the document is parsed in chunks, the one
    still being parsed kept until it is complete; emulators anywhere among them, a second <devices>, and
    <devices> elements deeper in the tree (kept whole) are read as the full parse reads them."""
    from lxml import etree

    from virtxml_cpu.xml import parse as xml_parse

    disk = b"<disk type='file'><source file='/d.img'/><target dev='vda'/></disk>"
    devices = lambda n: (b"<devices>" + disk * n + b"<emulator>/usr/bin/a</emulator>" + disk * 3000
                         + b"<emulator>/usr/bin/b</emulator>" + disk * 4000 + b"<emulator>/e</emulator></devices>")
    doc = (b"<domain type='kvm'><name>d</name><metadata><m:x xmlns:m='urn:x'><devices>" + disk * 5000
           + b"</devices></m:x></metadata>" + devices(2500) + b"<os><type>hvm</type></os>" + devices(7) + b"</domain>")
    assert len(doc) > 3 * xml_parse.LEAN_FROM_BYTES
    lean, full = xml_parse.parse_domain_lean(doc), etree.fromstring(doc)
    for el in full.findall("devices"):
        for child in el.findall("disk"):
            el.remove(child)
    assert etree.tostring(lean) == etree.tostring(full)
    assert [e.text for e in lean.iter("emulator")] == ["/usr/bin/a", "/usr/bin/b", "/e"] * 2


TEXT = st.one_of(st.none(), st.text(), st.sampled_from(['"', "\\", "\u2028", "\udc80", "é", "\x7f", "</a>"]))


@settings(max_examples=300, deadline=None)
@given(st.text(), TEXT, TEXT, st.sampled_from(SOURCES[:3]))
def test_the_json_line_is_the_encoders_bytes(label, name, uuid, path):
    """json_line writes the label, name, uuid and `changed` itself: the same bytes as the JSON encoder's
    line of to_json, whatever the strings hold (quotes, escapes, non-ASCII, lone surrogates, none)."""
    o = process(path.read_bytes(), "x.xml", combine([recorded_host()]), Config(), render=False)
    facts = o.resolution.facts._replace(name=name, uuid=uuid)
    o = o._replace(label=label, resolution=o.resolution._replace(facts=facts))
    line = json_line(o)
    assert line == explain.to_json_line(o) == json.dumps(explain.to_json(o), separators=(",", ":"))
    assert json.loads(line)["domain"] == name and json.loads(line)["file"] == label

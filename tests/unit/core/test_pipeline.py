"""Property-based: mutated fixtures never crash the tool, and rewrite, --check and explain agree.

For any input: either a one-line error with exit 2, or a decision; unchanged means byte-identical;
changed means text was only inserted (a self-closing parent may lose its '/'), and a second run changes
nothing; the decision without rendering (explain, --check) is the decision with it (rewrite)."""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from virtxml_cpu.core.config import Config
from virtxml_cpu.errors import VirtxmlCpuError
from virtxml_cpu.core.hostfacts import HostFacts
from virtxml_cpu.core.pipeline import process

from tests.support import FIXTURES, ROOT

SOURCES = sorted(p.read_bytes() for d in (FIXTURES, ROOT / "examples") for p in d.glob("*.xml"))
HOST = HostFacts(qemu_build="upstream", build_source="test")
SNIPPETS = [b"<pvspinlock/>", b"<pvspinlock state='off'/>", b"<features/>", b"<features>", b"</features>",
            b"<!-- x -->", b"<![CDATA[ < ]]>", b"\r", b"\r\n", b"\n", b"\t", b"<cpu mode='custom'/>",
            b"<cpu/>", b"<vmcoreinfo/>", b"<feature policy='require' name='kvm_pv_unhalt'/>", b"&amp;",
            b"<qemu:arg value='-S'/>", b"<cache mode='disable'/>", b"<numa/>", b"x", b"'", b"\"", b"<", b">",
            b"<?pi x?>", b"<a:b xmlns:a='u'/>", b"\xc3\xa9", b"\xff", b" ", b"/", b"="]

WELL_FORMED = [b"<pvspinlock/>", b"<pvspinlock state='off'/>", b"<features/>", b"<!-- x -->", b"<![CDATA[ < ]]>",
               b"\r", b"\r\n", b"\n", b"\t", b"<cpu mode='custom'/>", b"<vmcoreinfo/>", b"<acpi/>", b"note",
               b"<feature policy='require' name='kvm_pv_unhalt'/>", b"<cache mode='disable'/>", b"<?pi x?>",
               b"<a:b xmlns:a='u'/>", b"\xc3\xa9", b" ", b"<features><acpi/></features>", b"<kvm><hidden state='on'/></kvm>"]

mutation = st.one_of(
    st.tuples(st.just("between"), st.floats(0, 1), st.sampled_from(WELL_FORMED)),
    st.tuples(st.just("between"), st.floats(0, 1), st.sampled_from(WELL_FORMED)),
    st.tuples(st.just("between"), st.floats(0, 1), st.sampled_from(WELL_FORMED)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.sampled_from(SNIPPETS)),
    st.tuples(st.just("delete"), st.floats(0, 1), st.integers(1, 40)),
    st.tuples(st.just("bytes"), st.floats(0, 1), st.binary(min_size=1, max_size=6)),
)


def mutate(data: bytes, edits) -> bytes:
    for kind, where, what in edits:
        i = int(where * len(data))
        if kind == "between":  # right after a tag: mostly still well-formed, so the rewrite path is reached
            ends = [j + 1 for j, c in enumerate(data) if c == ord(">")] or [0]
            i = ends[int(where * (len(ends) - 1))]
            data = data[:i] + what + data[i:]
        elif kind == "delete":
            data = data[:i] + data[i + what:]
        else:
            data = data[:i] + what + data[i:]
    return data


def only_inserted(before: bytes, after: bytes) -> bool:
    it = iter(after)
    return all(any(c == d for d in it) for c in before)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=st.sampled_from(SOURCES), edits=st.lists(mutation, max_size=4))
def test_mutated_documents(source, edits):
    data = mutate(source, edits)
    try:
        decided = process(data, "m.xml", HOST, Config(), render=False)
    except VirtxmlCpuError as e:
        event("rejected")
        assert e.exit_code == 2 and "\n" not in str(e)
        try:
            process(data, "m.xml", HOST, Config())
        except VirtxmlCpuError as again:
            assert again.exit_code == 2
            return
        raise AssertionError("rewrite accepted what explain rejected")
    try:
        rewritten = process(data, "m.xml", HOST, Config())
    except VirtxmlCpuError as e:  # the rendering may refuse an unusual markup, never write a wrong tree
        assert e.exit_code == 2 and "nothing was changed" in str(e)
        return
    assert (decided.decision.action, decided.decision.rule) == (rewritten.decision.action, rewritten.decision.rule)
    assert decided.changed == rewritten.changed
    if not rewritten.changed:
        event("kept")
        assert rewritten.output == data
        return
    event("rewritten")
    out = rewritten.output
    assert only_inserted(data.replace(b"/>", b">"), out.replace(b"/>", b">")) or only_inserted(data, out)
    again = process(out, "m.xml", HOST, Config())
    assert not again.changed and again.output == out

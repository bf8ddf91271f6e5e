"""Golden files: each fixture's rewrite output and explain JSON, reviewed in diffs.

Regenerate with `pytest --regen` (or VIRTXML_CPU_REGEN=1) and review `git diff tests/fixtures/expected`.
"""

from __future__ import annotations

import json
import re

import pytest

from virtxml_cpu.render import explain
from virtxml_cpu.core.config import Config
from virtxml_cpu.core.hostfacts import HostFacts
from virtxml_cpu.core.pipeline import process

from tests.support import FIXTURES, ROOT

# tests/fixtures/*.xml and the examples `make demo` runs on, all with golden files.
SOURCES = {p.name: p for d in (FIXTURES, ROOT / "examples") for p in d.glob("*.xml")}
CASES = sorted(SOURCES)
EXPECTED = FIXTURES / "expected"


HOST_HEADER = re.compile(rb"<!-- host: (.*?) -->")


@pytest.fixture
def host_of(host):
    """The host a case assumes: its `<!-- host: key=value ... -->` header, else the recorded lab host (QEMU
    7.2, Debian). A header keeps the recorded KVM CPUID, sets the QEMU build and version, and `svm=yes`
    makes it an AMD host with nested SVM."""
    def facts(data: bytes) -> HostFacts:
        m = HOST_HEADER.search(data[:400])
        if not m:
            return host
        kv = dict(w.split("=", 1) for w in m.group(1).decode().split() if "=" in w)
        cpuid = dict(host.cpuid)
        if kv.get("svm") == "yes":
            cpuid[(0x80000001, "ecx")] = cpuid.get((0x80000001, "ecx"), 0) | 1 << 2
        return HostFacts(cpuid=cpuid, sources=("recorded KVM_GET_SUPPORTED_CPUID", "fixture header"),
                         qemu_version=tuple(int(p) for p in kv["qemu_version"].split(".")),
                         qemu_build=kv["qemu_build"], build_source="fixture header: " + m.group(1).decode(),
                         version_source="fixture header")
    return facts


def _check(path, actual: bytes, regen: bool):
    if regen:
        path.write_bytes(actual)
    assert path.exists(), f"missing golden file {path.name}; run pytest --regen and review it"
    assert actual == path.read_bytes(), f"{path.name} differs; if intended, run pytest --regen and review"


@pytest.mark.parametrize("name", CASES)
def test_rewrite_golden(name, host_of, regen):
    data = SOURCES[name].read_bytes()
    out = process(data, name, host_of(data), Config())
    _check(EXPECTED / name.replace(".xml", ".out.xml"), out.output, regen)


@pytest.mark.parametrize("name", CASES)
def test_explain_golden(name, host_of, regen):
    data = SOURCES[name].read_bytes()
    doc = explain.to_json(process(data, name, host_of(data), Config()))
    _check(EXPECTED / name.replace(".xml", ".explain.json"),
           (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode(), regen)


@pytest.mark.parametrize("name", CASES)
def test_untouched_means_byte_identical_and_rerun_is_noop(name, host_of):
    data = SOURCES[name].read_bytes()
    host = host_of(data)
    first = process(data, name, host, Config())
    if first.decision.action == "keep":
        assert first.output == data
    else:
        assert first.output != data
        # Only lines were added: every input line survives, in order.
        added = _added_lines(data, first.output)
        assert added and all("pvspinlock" in line or "features" in line for line in added), added
    second = process(first.output, name, host, Config())
    assert second.output == first.output
    assert second.decision.action == "keep"


def _added_lines(before: bytes, after: bytes) -> list[str]:
    import difflib

    a = before.decode().replace("\r\n", "\n").replace("\r", "\n").split("\n")
    b = after.decode().replace("\r\n", "\n").replace("\r", "\n").split("\n")
    diff = list(difflib.ndiff(a, b))
    removed = [d[2:] for d in diff if d.startswith("- ")]
    added = [d[2:] for d in diff if d.startswith("+ ")]
    # The one line allowed to change: a self-closing <features/> opened to take a child.
    for line in removed:
        opened = line.replace("/>", ">")
        assert line.strip().endswith("/>") and opened in added, f"input line changed or lost: {line!r}"
        added.remove(opened)
    return added

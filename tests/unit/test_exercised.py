"""After a full run: every rule row of every QEMU build applied somewhere, every libvirt_xml row was read
from some domain, and every decision rule was reached (the counterpart of virt-manager's test_checkprops). Runs last (marked `last`, which conftest
orders); skipped when only part of the suite was selected."""

from __future__ import annotations

from pathlib import Path

import pytest

from virtxml_cpu.tables.builds.known import BUILDS
from virtxml_cpu.tables.libvirt_xml import PLACEMENT, SETTINGS
from virtxml_cpu.core.decision import DECISION_RULES
from virtxml_cpu.core.pipeline import process
from virtxml_cpu.core.config import Config
from virtxml_cpu.core.hostfacts import HostFacts

from tests.support import FIXTURES, TESTS


@pytest.mark.last
def test_every_rule_row_and_decision_rule_was_exercised(request, exercised):
    ran = {Path(str(item.fspath)).resolve() for item in request.session.items}
    every = set(TESTS.rglob("test_*.py"))
    if ran != every:
        pytest.skip(f"partial run ({len(ran)} of {len(every)} test files): totals are checked on full runs only")
    rows = [(f.name, r) for f in BUILDS.values() for r in f.kvm_defaults + f.machine_rows]
    missing = [f"{name}: {r.layer} {r.prop}={r.value} ({r.source})" for name, r in rows
               if id(r) not in exercised["rows"]]
    assert not missing, "rule rows no test exercised:\n" + "\n".join(missing)
    assert set(DECISION_RULES) == exercised["decisions"], sorted(set(DECISION_RULES) ^ exercised["decisions"])
    unread = {s.key for s in SETTINGS} - exercised["settings"]
    assert not unread, f"libvirt_xml rows no domain exercised: {sorted(unread)}"
    unplaced = {p.key for p in PLACEMENT} - exercised["placement"]
    assert not unplaced, f"libvirt_xml PLACEMENT rows no domain exercised: {sorted(unplaced)}"


def test_decisions_name_only_known_rules():
    for path in FIXTURES.glob("*.xml"):
        o = process(path.read_bytes(), path.name, HostFacts(), Config(), render=False)
        assert o.decision.rule in DECISION_RULES, (path.name, o.decision.rule)

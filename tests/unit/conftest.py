"""Fixtures of the unit tests."""

from __future__ import annotations

import json
import sys

import pytest

from tests.support.qemu import FAKE_QEMU, MACHINES
from virtxml_cpu.verify import runner as qemu_runner


@pytest.fixture
def fake(tmp_path, monkeypatch):
    script = tmp_path / "fake-qemu"
    script.write_text(f"#!{sys.executable}\n{FAKE_QEMU}")
    script.chmod(0o755)

    def runner(**spec):
        monkeypatch.setenv("FAKE_QEMU", json.dumps({"machines": MACHINES, **spec}))
        return qemu_runner.Runner(str(script), qemu_runner.Identity("test"), spec.get("timeout", 5))
    return runner

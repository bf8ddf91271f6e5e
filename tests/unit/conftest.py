"""Fixtures of the unit tests."""

from __future__ import annotations

import json
import sys

import pytest

from tests.support.qemu import FAKE_QEMU, MACHINES
from virtxml_cpu.verify import launch


@pytest.fixture
def fake(tmp_path, monkeypatch):
    script = tmp_path / "fake-qemu"
    script.write_text(f"#!{sys.executable}\n{FAKE_QEMU}")
    script.chmod(0o755)

    def runner(**spec):
        monkeypatch.setenv("FAKE_QEMU", json.dumps({"machines": MACHINES, **spec}))
        return launch.Runner(str(script), launch.Identity("test"), spec.get("timeout", 5))
    return runner

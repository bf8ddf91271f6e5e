"""What test modules share besides fixtures: the tree's paths, the recorded lab host, a stand-in for the
hook's log, and the loud skip of a lab test module without root or /dev/kvm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from virtxml_cpu.core.hostfacts import HostFacts, combine, parse_capabilities, parse_domcapabilities

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
FIXTURES = TESTS / "fixtures"

# Why lab test modules skipped, for the red line at the end of the run (conftest's terminal summary).
lab_skip_reasons: list[str] = []


class Capture:
    """A stand-in for the hook's log (logline.Log): keeps the lines it is given."""

    def __init__(self):
        self.lines = []
        self.path = "/nonexistent"

    def __call__(self, message, warning=False, fallback=True):
        self.lines.append(message)


def recorded_host() -> HostFacts:
    """Host facts recorded from the lab host, so golden output does not depend on this machine."""
    data = json.loads((FIXTURES / "host" / "kvm-supported-cpuid.json").read_text())
    cpuid = {(int(k.split(":")[0], 16), k.split(":")[1]): v for k, v in data["cpuid"].items()}
    libvirt = combine([parse_capabilities((FIXTURES / "host" / "capabilities.xml").read_bytes()),
                       parse_domcapabilities((FIXTURES / "host" / "domcapabilities.xml").read_bytes())])
    return libvirt._replace(cpuid=cpuid, qemu_version=(7, 2, 22),
                            version_source="recorded: QEMU 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18)",
                            sources=("recorded KVM_GET_SUPPORTED_CPUID",) + libvirt.sources)


def require_lab():
    """For lab test modules: skip the module, loudly, only without root or /dev/kvm; else libvirt."""
    from tests.lab import harness

    missing = harness.lab_missing()
    if missing:
        lab_skip_reasons.append(missing)
        pytest.skip(f"REAL LIBVIRT/QEMU TESTS SKIPPED: {missing}", allow_module_level=True)
    import libvirt  # as root with /dev/kvm, `make test` installed it: missing here is a failure

    return libvirt

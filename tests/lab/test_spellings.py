"""-cpu +name/-name/name=on/bare name and -global with underscores against real QEMU: each resolved property's
underscore spelling in each form, started on QEMU 7.2.22 (the host) and 5.2.0, 10.0.2, 11.1.2 (their chroots, when present);
QEMU's start or refusal against the tool's for that release (tables/properties.py underscore_flag). No libvirt
daemon is touched."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.lab import harness
from virtxml_cpu.core import cpu_option
from virtxml_cpu.tables.properties import TABLE

pytestmark = pytest.mark.lab
RELEASES = {harness.HOST_LAB: (7, 2, 22), harness.BULLSEYE_LAB: (5, 2, 0), harness.BPO_LAB: (10, 0, 2),
            harness.FORKY_LAB: (11, 1, 2)}


def _lab_or_skip(lab: harness.Lab) -> None:
    missing = harness.qemu_missing(lab)
    if missing:
        pytest.skip(f"REAL QEMU TESTS SKIPPED: {missing}")


def _start(lab: harness.Lab, option: tuple[str, str]) -> str | None:
    """None when QEMU starts (paused) with this -cpu or -global, else its error."""
    commands = [{"execute": "qmp_capabilities"}, {"execute": "quit"}]
    proc = subprocess.run(harness.qemu_in(lab) + ["-machine", "pc,accel=tcg", "-S", "-nodefaults", "-display", "none",
                                                  "-cpu", "qemu64", *option, "-qmp", "stdio"],
                          input="".join(json.dumps(c) + "\n" for c in commands), capture_output=True, text=True,
                          timeout=120)
    return None if '"return"' in proc.stdout else proc.stderr.strip()


@pytest.mark.parametrize("lab", list(RELEASES), ids=[lab.key for lab in RELEASES])
def test_underscore_spellings_on_real_qemu(lab):
    _lab_or_skip(lab)
    release = RELEASES[lab]
    names = [p.name.replace("-", "_") for p in TABLE if "-" in p.name and p.exists_in(release)]
    options = [("-cpu", f"qemu64,{form}") for u in names for form in (f"+{u}", f"-{u}", f"{u}=on", u)]
    options += [("-global", f"x86_64-cpu.{u}=on") for u in names]
    with ThreadPoolExecutor(2) as pool:
        seen = dict(zip(options, pool.map(lambda option: _start(lab, option), options)))
    wrong = []
    for (option, arg), error in seen.items():
        if option == "-cpu":
            said = cpu_option.qemu_refusal(None, "named", cpu_option.parse_cpu_option(arg, release), (), release)
        else:
            driver_prop, value = arg.split("=")
            said = cpu_option.qemu_refusal("qemu64", "named", None, (tuple(driver_prop.split(".")) + (value,),),
                                           release)
        if (said is None) != (error is None) or (said and said not in error):
            wrong.append(f"{option} {arg}: QEMU {lab.key}: {error!r}, the tool: {said!r}")
    assert not wrong, "\n".join(wrong)

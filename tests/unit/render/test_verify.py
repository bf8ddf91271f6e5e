"""verify's output through render/verify.py over its VerifyResult: the lines, what --quiet keeps, the --json file."""

from __future__ import annotations

import json

from virtxml_cpu.tables import qemu
from virtxml_cpu.verify import run as verify
from virtxml_cpu.host.sources import assemble
from virtxml_cpu.render import verify as render
from virtxml_cpu.verify import launch as runner

from tests.support.qemu import TRUE_7_2, named


def _outcome(fake) -> verify.VerifyResult:  # noqa: F811
    binary = runner.probe(fake())
    host = assemble(verify.sources(verify.VerifyOptions(), binary, kvm=False))
    bad = runner.read_vcpu(fake(props={"pc-i440fx-2.7/Skylake-Client": TRUE_7_2}), "pc-i440fx-2.7", named("intel"))
    failed = runner.read_vcpu(fake(fail="failed to set MSR 0x10a"), "pc", named("host"))
    found = verify.disagreements(bad, verify.tool_answer("pc-i440fx-2.7", named("intel"), host))
    return verify.VerifyResult(binary, host, runner.Identity("test"), ["pc", "pc-i440fx-2.7"], [named("intel"), named("host")],
                          [bad, failed], found, None, 1.25)


def test_lines_quiet_lines_and_the_json_document(fake):  # noqa: F811
    o = _outcome(fake)
    lines = render.lines(o)
    assert lines[0] == "QEMU %s: QEMU emulator version 7.2.9 (Fake 1:7.2-1); run as test" % o.binary.emulator
    assert lines[3] == "CPU models: Skylake-Client, host"
    assert lines[4] == "not started: pc host: qemu-system-x86_64: failed to set MSR 0x10a"
    assert [line for line in lines if line.startswith("DISAGREE")] == [d.line() for d in o.disagreements]
    assert lines[-1] == (f"verify: 2 machine types x 2 CPU models x {len(qemu.PROPERTIES)} properties = "
                         f"{len(qemu.PROPERTIES)} checks (1 QEMUs, 1 not started (listed above)); compat-props: "
                         "not answered by this QEMU; machine status: 0 names; "
                         f"{len(o.disagreements)} disagreements; 1.2 s")
    assert render.lines(o, quiet=True) == [line for line in lines if line.startswith(render.QUIET)] == lines[4:]
    doc = render.json_document(o)
    assert doc == json.dumps(render.report(o), indent=1) + "\n"
    data = json.loads(doc)
    assert data["summary"]["not_started"] == 1 and data["disagreements"][0]["prop"] == o.disagreements[0].prop
    assert dict(data["runs"][1], seconds=0) == {"machine": "pc", "cpu": "host", "qemu": None, "tool": None,
                                                "error": "qemu-system-x86_64: failed to set MSR 0x10a", "seconds": 0}

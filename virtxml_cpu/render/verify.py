"""verify's output over its VerifyResult (verify/types.py): the lines a person reads, and the JSON document a
user attaches to a bug report (pure)."""

from __future__ import annotations

import json

from .. import __version__
from ..core import precedence
from ..tables import qemu
from ..verify.types import VerifyResult

QUIET = ("DISAGREE", "not started", "verify:")  # the lines --quiet keeps


def summary(o: VerifyResult) -> str:
    compat = ("compat-props: not answered by this QEMU" if o.compat_checked is None
              else f"compat-props: {o.compat_checked} checks")
    failed = f", {len(o.failed)} not started (listed above)" if o.failed else ""
    return (f"verify: {len(o.machines)} machine types x {len(o.modes)} CPU models x {len(qemu.PROPERTIES)} "
            f"properties = {o.checks} checks ({len(o.runs) - len(o.failed)} QEMUs{failed}); {compat}; "
            f"machine status: {o.lifecycle_checked} names; "
            f"{len(o.disagreements)} disagreements; {o.seconds:.1f} s")


def lines(o: VerifyResult, quiet: bool = False) -> list[str]:
    """Each line of the run, what --quiet keeps only when `quiet`."""
    b, h = o.binary, o.host
    out = [f"QEMU {b.emulator}: QEMU emulator version {b.version}" + (f" ({b.package})" if b.package else "")
           + f"; run as {o.identity.name}",
           f"build: {h.qemu_build} ({h.build_source})",
           f"release: {precedence.described(h)}",
           f"CPU models: {', '.join(m.label for m in o.modes)}"]
    out += [f"not started: {r.machine} {r.mode.label}: {r.error}" for r in o.failed]
    out += [d.line() for d in o.disagreements]
    out.append(summary(o))
    return [line for line in out if not quiet or line.startswith(QUIET)]


def report(o: VerifyResult) -> dict:
    """The JSON a user attaches to a bug report."""
    b, h = o.binary, o.host
    return {
        "tool": f"virtxml-cpu {__version__}", "emulator": b.emulator, "qemu_version": b.version,
        "package": b.package, "build": h.qemu_build, "build_basis": h.build_source,
        "release": precedence.described(h),
        "qemu_user": o.identity.name, "properties": list(qemu.PROPERTIES),
        "cpu_models": {m.key: {"label": m.label, "-cpu": m.qemu_cpu, "libvirt": m.cpu_xml} for m in o.modes},
        "machines": o.machines, "compat_props_answered": o.compat_checked is not None,
        "runs": [{"machine": r.machine, "cpu": r.mode.key, "qemu": r.qemu, "tool": o.tool.get((r.machine, r.mode.key)),
                  "error": r.error, "seconds": round(r.seconds, 3)} for r in o.runs],
        "disagreements": [d._asdict() for d in o.disagreements],
        "summary": {"machine_types": len(o.machines), "cpu_models": len(o.modes),
                    "properties": len(qemu.PROPERTIES), "checks": o.checks, "not_started": len(o.failed),
                    "compat_checks": o.compat_checked, "lifecycle_checks": o.lifecycle_checked,
                    "disagreements": len(o.disagreements),
                    "seconds": round(o.seconds, 1)},
    }


def json_document(o: VerifyResult) -> str:
    """The file --json writes."""
    return json.dumps(report(o), indent=1) + "\n"

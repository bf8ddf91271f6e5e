"""`virtxml-cpu verify`: the rules against the QEMU this host runs.

The tool can only be as right as its tables, and most users run QEMU builds nobody here has run. So: start
the host's own QEMU paused, without disks or devices, for every x86 machine type it lists x a few CPU models,
read what vCPU 0 really has (QMP qom-get), and compare with what the tool computes for a libvirt domain
with the same machine and CPU under the build it detected. Where the QEMU reports its machines' compat
properties (query-machines compat-props, QEMU 10), those are checked against the tool too.

The package: types.py (the records), compare.py (what to run and how to judge it, pure), runner.py (the
only part that starts processes), record.py (the record of passes); here, the verb: run() and its output.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from .. import __version__, qemu_build, rules
from ..errors import BadInput, EnvironmentProblem
from ..hostsrc import assemble
from ..qmp import QMPClosed
from . import runner as qr
from .compare import (MODE_KEYS, compat_cases, compat_disagreements, cpu_modes, disagreements, domain_xml,
                      lifecycle_disagreements, machine_facts, qemu_facts, sources, tool_answer, x86_machines)
from .types import DEFAULT_RECORD, DEFAULT_TIMEOUT, Build, CpuMode, Disagreement, Identity, Outcome, Run, VerifyOptions

__all__ = ["DEFAULT_RECORD", "DEFAULT_TIMEOUT", "MODE_KEYS", "Build", "CpuMode", "Disagreement", "Identity",
           "Outcome", "Run", "VerifyOptions", "compat_cases", "compat_disagreements", "cpu_modes", "disagreements",
           "domain_xml", "lifecycle_disagreements", "lines", "machine_facts", "qemu_facts", "report", "run",
           "sources", "summary", "tool_answer", "x86_machines"]


def summary(o: Outcome) -> str:
    compat = ("compat-props: not answered by this QEMU" if o.compat_checked is None
              else f"compat-props: {o.compat_checked} checks")
    failed = f", {len(o.failed)} not started (listed above)" if o.failed else ""
    return (f"verify: {len(o.machines)} machine types x {len(o.modes)} CPU models x {len(rules.PROPERTIES)} "
            f"properties = {o.checks} checks ({len(o.runs) - len(o.failed)} QEMUs{failed}); {compat}; "
            f"machine status: {o.lifecycle_checked} names; "
            f"{len(o.disagreements)} disagreements; {o.seconds:.1f} s")


def lines(o: Outcome) -> list[str]:
    b, h = o.build, o.host
    out = [f"QEMU {b.emulator}: {b.version_line}; run as {o.identity.name}",
           f"build: {h.qemu_flavour} ({h.flavour_source})",
           f"release: {qemu_build.described(h)}",
           f"CPU models: {', '.join(m.label for m in o.modes)}"]
    out += [f"not started: {r.machine} {r.mode.label}: {r.error}" for r in o.failed]
    out += [d.line() for d in o.disagreements]
    out.append(summary(o))
    return out


def report(o: Outcome) -> dict:
    """The JSON a user attaches to a bug report."""
    b, h = o.build, o.host
    return {
        "tool": f"virtxml-cpu {__version__}", "emulator": b.emulator, "qemu_version": b.version,
        "package": b.package, "build": h.qemu_flavour, "build_basis": h.flavour_source,
        "release": qemu_build.described(h),
        "qemu_user": o.identity.name, "properties": list(rules.PROPERTIES),
        "cpu_models": {m.key: {"label": m.label, "-cpu": m.qemu_cpu, "libvirt": m.cpu_xml} for m in o.modes},
        "machines": o.machines, "compat_props_answered": o.compat_checked is not None,
        "runs": [{"machine": r.machine, "cpu": r.mode.key, "qemu": r.qemu, "tool": o.tool.get((r.machine, r.mode.key)),
                  "error": r.error, "seconds": round(r.seconds, 3)} for r in o.runs],
        "disagreements": [d._asdict() for d in o.disagreements],
        "summary": {"machine_types": len(o.machines), "cpu_models": len(o.modes),
                    "properties": len(rules.PROPERTIES), "checks": o.checks, "not_started": len(o.failed),
                    "compat_checks": o.compat_checked, "lifecycle_checks": o.lifecycle_checked,
                    "disagreements": len(o.disagreements),
                    "seconds": round(o.seconds, 1)},
    }


# ---------------------------------------------------------------------------------------------------------
# The one shell step: start the QEMUs, then compare.

def run(opts: VerifyOptions) -> Outcome:
    start = time.monotonic()
    emulator, libvirt_version = qr.find_emulator(opts)
    qr.check_kvm()
    identity = qr.qemu_identity()
    runner = qr.Runner(emulator, identity, opts.timeout)
    try:
        build = qr.probe(runner)
    except QMPClosed as e:
        raise EnvironmentProblem(f"QEMU or KVM is not usable: {emulator} (as {identity.name}): {e}") from None
    if libvirt_version and libvirt_version != build.version:  # a libvirtd in a chroot or container
        raise EnvironmentProblem(f"{opts.connect} runs QEMU {libvirt_version}, but {emulator} here is "
                                 f"{build.version}: libvirt's emulator lives in another filesystem; "
                                 "name it with --emulator")
    host = assemble(sources(opts, build))
    machines = x86_machines(build.machines, opts.machines)
    modes = cpu_modes(build.models, opts.modes)
    if not machines:
        raise BadInput(f"{emulator} lists no x86 PC machine type"
                       + (" matching --machine" if opts.machines else ""))
    if opts.progress:
        opts.progress(f"{len(machines)} machine types x {len(modes)} CPU models on {emulator}, "
                      f"{opts.workers} at a time")
    jobs = [(m, mode) for m in machines for mode in modes]
    with ThreadPoolExecutor(max_workers=max(1, opts.workers)) as pool:
        runs = list(pool.map(lambda job: qr.read_vcpu(runner, *job), jobs))
    tool = {(r.machine, r.mode.key): tool_answer(r.machine, r.mode, host) for r in runs if r.qemu is not None}
    found = [d for r in runs if r.qemu is not None for d in disagreements(r, tool[r.machine, r.mode.key])]
    compat_checked = None
    if build.compat_props:
        cases = compat_cases(build.machines, opts.machines)
        compat_checked = len(cases) * len(modes) * 2 * len(rules.PROPERTIES)
        found += [d for case in cases for mode in modes for d in compat_disagreements(case, mode, host)]
    lifecycle_checked, lifecycle_found = lifecycle_disagreements(build.machines, host)
    found += lifecycle_found
    if all(r.qemu is None for r in runs):
        raise EnvironmentProblem(f"QEMU started no machine type: {runs[0].error}")
    if runner.killed >= qr.GIVE_UP_AFTER:
        raise EnvironmentProblem(f"{emulator} stopped answering: {runner.killed} QEMUs killed after "
                                 f"{opts.timeout:g} s each; nothing verified")
    return Outcome(build, host, identity, machines, modes, runs, found, compat_checked, time.monotonic() - start,
                   {k: {p: v.qemu_property for p, v in res.features.items() if p in rules.PROPERTIES}
                    for k, res in tool.items()}, lifecycle_checked)

"""`virtxml-cpu verify`: the rules against the QEMU this host runs.

The tool can only be as right as its tables, and most users run QEMU builds nobody here has run. So: start
the host's own QEMU paused, without disks or devices, for every x86 machine type it lists x a few CPU models,
read what vCPU 0 really has (QMP qom-get), and compare with what the tool computes for a libvirt domain
with the same machine and CPU under the build it detected. Where the QEMU reports its machines' compat
properties (query-machines compat-props, QEMU 10), those are checked against the tool too.

The package: types.py (the records), compare.py (what to run and how to judge it, pure), launch.py (the
only part that starts processes), record.py (the record of passes); here, the verb: run(). Its output
is render/verify.py's.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from ..tables import qemu
from ..errors import BadInput, EnvironmentProblem
from ..host.sources import assemble
from ..host.qmp import QMPClosed
from . import launch
from .compare import (compat_cases, compat_disagreements, cpu_modes, disagreements, domain_xml,
                      lifecycle_disagreements, machine_facts, qemu_facts, sources, tool_answer, x86_machines)
from .types import DEFAULT_TIMEOUT, MODE_KEYS, QemuBinary, CpuMode, Disagreement, Identity, VerifyResult, Run, VerifyOptions

__all__ = ["DEFAULT_TIMEOUT", "MODE_KEYS", "QemuBinary", "CpuMode", "Disagreement", "Identity",
           "VerifyResult", "Run", "VerifyOptions", "compat_cases", "compat_disagreements", "cpu_modes", "disagreements",
           "domain_xml", "lifecycle_disagreements", "machine_facts", "qemu_facts", "run", "sources", "tool_answer",
           "x86_machines"]


# ---------------------------------------------------------------------------------------------------------
# The one shell step: start the QEMUs, then compare.

def run(opts: VerifyOptions) -> VerifyResult:
    start = time.monotonic()
    emulator, libvirt_version = launch.find_emulator(opts)
    launch.check_kvm()
    identity = launch.qemu_identity()
    runner = launch.Runner(emulator, identity, opts.timeout)
    try:
        binary = launch.probe(runner)
    except QMPClosed as e:
        raise EnvironmentProblem(f"QEMU or KVM is not usable: {emulator} (as {identity.name}): {e}") from None
    if libvirt_version and libvirt_version != binary.version:  # a libvirtd in a chroot or container
        raise EnvironmentProblem(f"{opts.connect} runs QEMU {libvirt_version}, but {emulator} here is "
                                 f"{binary.version}: libvirt's emulator lives in another filesystem; "
                                 "name it with --emulator")
    host = assemble(sources(opts, binary))
    machines = x86_machines(binary.machines, opts.machines)
    modes = cpu_modes(binary.models, opts.modes)
    if not machines:
        raise BadInput(f"{emulator} lists no x86 PC machine type"
                       + (" matching --machine" if opts.machines else ""))
    if opts.progress:
        opts.progress(f"{len(machines)} machine types x {len(modes)} CPU models on {emulator}, "
                      f"{opts.workers} at a time")
    jobs = [(m, mode) for m in machines for mode in modes]
    with ThreadPoolExecutor(max_workers=max(1, opts.workers)) as pool:
        runs = list(pool.map(lambda job: launch.read_vcpu(runner, *job), jobs))
    tool = {(r.machine, r.mode.key): tool_answer(r.machine, r.mode, host) for r in runs if r.qemu is not None}
    found = [d for r in runs if r.qemu is not None for d in disagreements(r, tool[r.machine, r.mode.key])]
    compat_checked = None
    if binary.compat_props:
        cases = compat_cases(binary.machines, opts.machines)
        compat_checked = len(cases) * len(modes) * 2 * len(qemu.PROPERTIES)
        found += [d for case in cases for mode in modes for d in compat_disagreements(case, mode, host)]
    lifecycle_checked, lifecycle_found = lifecycle_disagreements(binary.machines, host)
    found += lifecycle_found
    if all(r.qemu is None for r in runs):
        raise EnvironmentProblem(f"QEMU started no machine type: {runs[0].error}")
    if runner.killed >= launch.GIVE_UP_AFTER:
        raise EnvironmentProblem(f"{emulator} stopped answering: {runner.killed} QEMUs killed after "
                                 f"{opts.timeout:g} s each; nothing verified")
    return VerifyResult(binary, host, identity, machines, modes, runs, found, compat_checked, time.monotonic() - start,
                   {k: {p: v.qemu_property for p, v in res.features.items() if p in qemu.PROPERTIES}
                    for k, res in tool.items()}, lifecycle_checked)

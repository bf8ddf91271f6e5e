#!/usr/bin/env python3
"""What the hook costs a guest start, in the real lab: `virsh start` + `virsh destroy` of a minimal guest
(64 MiB, 1 vCPU, no disk) with and without the installed hook, medians and their ratio.

Batches with and without the hook alternate; libvirtd discovers hooks when it starts and on SIGHUP, so it
is reloaded between batches (tests/lab/harness.py). A third kind of batch has only a script that exits 0
in qemu.d: what any hook costs (libvirtd forks and waits for it at each operation). The hook is installed as `virtxml-cpu hook install`
does (audit mode, logging to a socket this script reads, as syslog would); its first start of the guest
evaluates in full, the later ones are answered from the decision digest, as repeat starts are. Root and
/dev/kvm only; run it under the lab lock: flock /tmp/virtxml-lab.lock .venv/bin/python bench/hook_start.py
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.lab import harness  # noqa: E402
from virtxml_cpu.hook import install  # noqa: E402

HOOKS = "/etc/libvirt/hooks"
TARGET = 1.05


def guest(name: str) -> str:
    return f"""<domain type='kvm'>
  <name>{name}</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <video><model type='none'/></video>
  </devices>
</domain>
"""


def virsh(*args: str) -> None:
    subprocess.run(["virsh", "-q", "-c", harness.URI, *args], check=True, stdout=subprocess.DEVNULL)


def cycle(name: str) -> tuple[float, float]:
    """Seconds of `virsh start` and of `virsh destroy`."""
    t0 = time.perf_counter()
    virsh("start", name)
    t1 = time.perf_counter()
    virsh("destroy", name)
    return t1 - t0, time.perf_counter() - t1


class LogReader(threading.Thread):
    """The hook's syslog: every datagram read, the lines kept."""

    def __init__(self, path: str):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.lines: list[str] = []

    def run(self) -> None:
        while True:
            try:
                self.lines.append(self.sock.recv(65536).decode(errors="replace"))
            except OSError:
                return


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-b", "--batches", type=int, default=6, help="batches of each kind (default 6)")
    ap.add_argument("-n", "--runs", type=int, default=10, help="start+destroy cycles per batch (default 10)")
    args = ap.parse_args()
    missing = harness.lab_missing()
    if missing:
        print(f"SKIPPED: the lab benchmark needs root and /dev/kvm ({missing})")
        return 0
    harness.bring_up()
    installed = Path(HOOKS) / "qemu.d" / "virtxml-cpu"
    if installed.exists():
        print(f"SKIPPED: {installed} is installed already; not touching it")
        return 0
    name = harness.unique_name("bench")
    samples: dict[str, list[tuple[float, float]]] = {"without": [], "null hook": [], "with": []}
    null = Path(HOOKS) / "qemu.d" / "zz-virtxml-cpu-bench-null"
    with tempfile.TemporaryDirectory() as tmp:
        log = LogReader(f"{tmp}/log.sock")
        log.start()
        cfg = Path(tmp) / "config.toml"
        cfg.write_text(f'[hook]\nmode = "audit"\nspool = "{tmp}/spool"\nsyslog_socket = "{tmp}/log.sock"\n')
        xml = Path(tmp) / "guest.xml"
        xml.write_text(guest(name))
        virsh("define", str(xml))
        try:
            cycle(name)  # QEMU and libvirt warm
            for batch in range(3 * args.batches):
                kind = ("without", "null hook", "with")[batch % 3]
                if kind == "with":
                    install.install(HOOKS, "audit", str(cfg), legacy=False, digest_dir=f"{tmp}/decisions")
                elif kind == "null hook":  # what any hook costs: libvirtd forking and waiting for a script
                    null.parent.mkdir(parents=True, exist_ok=True)
                    null.write_text("#!/bin/sh\nexit 0\n")
                    null.chmod(0o755)
                harness.reload_hooks()
                samples[kind] += [cycle(name) for _ in range(args.runs)]
                if kind == "with":
                    install.uninstall(HOOKS)
                null.unlink(missing_ok=True)
        finally:
            if installed.exists():
                install.uninstall(HOOKS)
            null.unlink(missing_ok=True)
            harness.reload_hooks()
            subprocess.run(["virsh", "-q", "-c", harness.URI, "undefine", name], capture_output=True)
        log.sock.close()
    prepared = [line for line in log.lines if f"domain={name}" in line]
    cached = sum(" cached=yes" in line for line in prepared)
    print(f"virsh start + destroy of a minimal guest (64 MiB, 1 vCPU, no disk), {args.batches} batches x "
          f"{args.runs} each way, interleaved, libvirtd reloaded between batches; {len(prepared)} prepare lines "
          f"logged, {cached} answered from the decision digest")
    for what, pick in (("start + destroy", lambda s: s[0] + s[1]), ("start alone", lambda s: s[0])):
        med = {k: statistics.median(pick(x) for x in v) * 1000 for k, v in samples.items()}
        ratio = med["with"] / med["without"]
        print(f"  {what:<16} without a hook {med['without']:6.0f} ms, a null hook {med['null hook']:6.0f} ms, "
              f"the hook {med['with']:6.0f} ms (medians of {len(samples['with'])})")
        print(f"  {'':<16} the hook / without = {ratio:.3f}x (+{med['with'] - med['without']:.1f} ms; target <= "
              f"{TARGET}x{'' if ratio <= TARGET else ': MISSED'}); the hook / a null hook = "
              f"{med['with'] / med['null hook']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

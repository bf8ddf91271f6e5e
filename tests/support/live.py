"""`watch` run in a thread over libvirt's test driver, as the unit tests of what it logs use it."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from virtxml_cpu.core.config import Config
from virtxml_cpu.host.sources import HostSources, NotAsked
from virtxml_cpu.live.apply import ApplyOptions
from virtxml_cpu.live.watch import watch


@contextmanager
def watching(uri: str = "test:///default", seconds: float = 10):
    """watch() over `uri` (QEMU build upstream, no host probe) until the block ends; yields the
    (message, warning) pairs it logs, once it has said it is watching (or `seconds` passed; as long to stop)."""
    logged, stop = [], threading.Event()
    cfg = Config(qemu_build="upstream")
    opts = ApplyOptions(cfg, sources=HostSources(config=cfg, kvm=NotAsked("--no-host-probe")))
    t = threading.Thread(target=watch, args=(uri, opts, stop, lambda m, warning=False: logged.append((m, warning))))
    t.start()
    try:
        deadline = time.monotonic() + seconds
        while not any(m.startswith("watching") for m, _w in logged) and time.monotonic() < deadline:
            time.sleep(0.05)
        yield logged
    finally:
        stop.set()
        t.join(seconds)

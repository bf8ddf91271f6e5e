"""`virtxml-cpu watch`: the service that fixes each newly defined or updated domain (live/watch.py)."""

from __future__ import annotations

from .live import live_sources, require_libvirt
from .options import include_managed, live_verb


def arguments(sub):
    p = live_verb(sub, "watch", "fix each newly defined or updated domain (service)",
                  "Listen to libvirt lifecycle events and apply the policy to every domain defined or redefined; "
                  "also applies the hook's queue. Reconnects when libvirtd restarts; stops on SIGTERM. See "
                  "contrib/systemd/.", several=False)
    include_managed(p)
    return p


def main(args) -> int:
    require_libvirt()
    from ..core import config
    from ..core.precedence import timeouts
    from ..live.apply import ApplyOptions
    from ..live.watch import watch

    cfg = config.load(args.config)
    return watch(args.connect, ApplyOptions(cfg, args.policy, args.style, sources=live_sources(args, cfg),
                                            timeout=timeouts(args.timeout, cfg)[0].value,
                                            include_managed=args.include_managed))

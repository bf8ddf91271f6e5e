"""The hook's Python entry: the shell front (hook/qemu-hook) execs an isolated interpreter into `main`.

A repeat start is answered from the decision digest (virtxml_cpu.hook.digest, its entries named by
virtxml_cpu.hook.digest_key) with the same log line as a full evaluation plus `cached=yes`, importing neither
lxml nor the rule tables; anything else goes to virtxml_cpu.hook.evaluate, which evaluates and keeps its
verdict for the next start. What both do with a verdict (log, refuse, queue) is virtxml_cpu.hook.act. Fails
open: no error here stops a guest.
"""

from __future__ import annotations

import sys

from ..constants import HOOK_OPS, MAX_DEFINITION_BYTES
from .act import act
from .logline import SYSLOG_SOCKET, Log


def main(argv: list[str], stdin=None) -> int:
    """argv as the front passes it: mode, config path, digest directory ('' each: the default), then
    libvirt's domain, operation, sub-operation, extra. Fails open: whatever goes wrong is one line on
    stderr (libvirt logs it) and exit 0, the guest starts."""
    try:
        return _main(argv, stdin)
    except Exception as e:  # noqa: BLE001 - never refuse a start for our own error
        line = f"virtxml-cpu hook: {type(e).__name__}: {e}; guest start not checked".replace("\n", " ")
        sys.stderr.write(line + "\n")
        return 0


def _main(argv: list[str], stdin) -> int:
    mode, config_path, digest_dir = (list(argv[:3]) + ["", "", ""])[:3]
    args = list(argv[3:])
    name, op, sub = (args + ["-", "-", "-"])[:3]
    if (op, sub) not in HOOK_OPS:
        return 0
    stdin = stdin if stdin is not None else sys.stdin.buffer
    data = stdin.read(MAX_DEFINITION_BYTES + 1)
    key, raw = None, False  # raw: the config's bytes, read once (False: not read)
    if digest_dir:
        try:
            from . import digest, digest_key
            from ..core.config import read_raw

            raw = read_raw(config_path or None, environ={})
            key = digest_key.key(data, name, mode, config_path, raw)
            hit = digest.lookup(digest_dir, key)
            if hit is not None:
                return act(hit, op, Log(hit.get("syslog") or SYSLOG_SOCKET), cached=True, name=name)
        except Exception:  # noqa: BLE001 - the digest is only a shortcut: evaluate in full
            key = None
    try:
        from .evaluate import run
    except Exception as e:  # noqa: BLE001 - lxml moved or broken: fail open
        sys.stderr.write(f"virtxml-cpu hook: cannot load virtxml_cpu ({e}); guest start not checked\n")
        return 0
    return run(args, mode=mode or None, config_path=config_path or None, data=data,
               digest_dir=digest_dir or None, digest_key=key, config_raw=raw if key else False)

"""The QEMU builds the rules know, in the order a machine name is tried against them.

Adding a QEMU release or a distribution means adding data here (a Release row, a Rule row, a Build), not
code: core/machines.py and core/resolve.py interpret whatever these tables say.
"""

from __future__ import annotations

from .model import I440FX, PC, Q35, AgeRule, Alias, Build, Lifecycle, NameTable, Release, Rule, Span
from .rhel import RHEL
from .ubuntu import UBUNTU
from .upstream import UPSTREAM

BUILDS: dict[str, Build] = {f.name: f for f in (UPSTREAM, UBUNTU, RHEL)}
NAMES: tuple[str, ...] = tuple(BUILDS)

__all__ = ["BUILDS", "NAMES", "I440FX", "PC", "Q35", "AgeRule", "Alias", "Build", "Lifecycle", "NameTable",
           "Release", "Rule", "Span", "UPSTREAM", "UBUNTU", "RHEL"]

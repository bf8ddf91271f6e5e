"""One domain document in, one outcome out: parse -> facts -> resolution -> decision -> rewritten bytes."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable

from . import domain, engine, policy
from .config import Config
from .hostfacts import HostFacts
from .xmlio import parse_domain, parse_domain_lean


class Outcome(namedtuple("Outcome", "label resolution decision policy_source style source output")):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    label: str
    resolution: engine.Resolution
    decision: policy.Decision
    policy_source: str
    style: str
    source: bytes
    output: bytes | None  # None when not rendered (explain, --check, audit, the hook)

    @property
    def changed(self) -> bool:
        """Whether the rewrite changes the document (decided without rendering when it was not rendered)."""
        return self.decision.action == "inject" if self.output is None else self.output != self.source


def process(data: bytes, label: str, host: HostFacts | Callable[[domain.DomainFacts], HostFacts], config: Config,
            cli_policy: str | None = None, cli_style: str | None = None, render: bool = True) -> Outcome:
    """`render=False` decides without producing the rewritten bytes (explain, --check, audit, the hook), from
    a lean parse that drops what no decision reads. `host` may be a function of the domain's facts (the
    hook learns the QEMU build from the domain's own devices/emulator, read from this one parse)."""
    tree = parse_domain(data, label) if render else None
    facts = domain.extract(tree.getroot() if tree is not None else parse_domain_lean(data, label))
    resolution = engine.resolve(facts, host(facts) if callable(host) else host)
    chosen, source = policy.effective_policy(cli_policy, config.policy, facts.override_policy)
    style = cli_style or config.style
    if facts.override_policy is not None and facts.override_policy not in policy.POLICIES:
        decision = policy.invalid_exemption(facts.override_policy)
        source = "domain <metadata>"
    else:
        decision = policy.decide(resolution, chosen, style)
    if not render:
        return Outcome(label, resolution, decision, source, style, data, None)
    from . import rewrite  # here: deciding alone (the hook, audit, explain) never renders

    insertions = rewrite.plan(tree.getroot(), style) if decision.action == "inject" else []
    return Outcome(label, resolution, decision, source, style, data, rewrite.render(data, tree, insertions))

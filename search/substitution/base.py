"""What every graph rewrite rule is: a pattern, a graph rewrite and the matching weight transform.

A `Rule` finds `Match`es in a `ComputeGraph` (`find`), rewrites the graph at one match
(`apply`, a new graph: graphs are immutable) and transforms the parameters of the old graph into
those of the new one (`transform`), so that `simulator.workload.execute` gives the same output
before and after: that equivalence is every rule's test. A match is a value (the rule's name,
the names of the ops it touches, its arguments), JSON-ready, so that a plan can record the
rewrites that produced its graph and they can be replayed (`replay`).

Rules that depend on the machine (operator fission targets the buffer) read it from the
`RuleContext` they are given; the others ignore it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from simulator.errors import InputError
from simulator.workload.graph import ComputeGraph, freeze_attrs

if TYPE_CHECKING:
    from simulator.cost.evaluate import CostCache
    from simulator.hw import HardwareConfig
    from simulator.scheme import Scheme
    from simulator.workload.execute import Params

__all__ = ["Match", "Rewrite", "RewriteError", "Rule", "RuleContext", "apply_all", "replay"]


class RewriteError(InputError):
    """A rewrite that cannot be applied (a recorded match that no longer matches, an unknown
    rule, a rewritten graph that breaks an IR invariant)."""


@dataclass(frozen=True)
class Match:
    """Where a rule applies.

    Attributes:
        rule: The rule's registry name.
        ops: Names of the ops the rewrite reads or replaces, the anchor first.
        args: The rule's choices at this match as sorted (key, value) pairs of JSON scalars or
            tuples of them (e.g. ``(("axis", "out_channels"), ("pieces", 4))``).
    """

    rule: str
    ops: tuple[str, ...]
    args: tuple[tuple[str, Any], ...] = ()

    def arg(self, key: str, default: Any = None) -> Any:
        """Value of argument `key`, or `default`."""
        return dict(self.args).get(key, default)

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "ops": list(self.ops), "args": dict(self.args)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Match:
        try:
            return cls(rule=str(d["rule"]), ops=tuple(str(o) for o in d["ops"]),
                       args=freeze_attrs(d.get("args", {})))
        except (KeyError, TypeError) as exc:
            raise RewriteError(f"a recorded rewrite is malformed ({exc}): {dict(d)!r:.120}") \
                from None

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.args)
        return f"{self.rule}({', '.join(self.ops)}{'; ' + args if args else ''})"


@dataclass(frozen=True)
class RuleContext:
    """What a machine-dependent rule may read: the hardware, the dataflow and the cost cache of
    the graph being rewritten (None when rewriting without a target machine)."""

    hw: HardwareConfig | None = None
    scheme: Scheme | None = None
    cache: CostCache | None = field(default=None, compare=False)


@runtime_checkable
class Rule(Protocol):
    """A graph rewrite rule.

    Attributes:
        name: Registry name (lower case, dashes), also `Match.rule`.
        stage: The pipeline stage it belongs to: ``fuse``, ``fission`` or ``substitute``.
        citation: Where the rule comes from (paper and section).
    """

    name: str
    stage: str
    citation: str

    def find(self, graph: ComputeGraph, ctx: RuleContext) -> list[Match]:
        """Every place the rule applies in `graph`, in a deterministic order."""
        ...

    def apply(self, graph: ComputeGraph, match: Match) -> ComputeGraph:
        """`graph` rewritten at `match`; raises `RewriteError` if `match` does not hold."""
        ...

    def transform(self, graph: ComputeGraph, match: Match, params: Params) -> Params:
        """Parameters of `apply(graph, match)` from the parameters `params` of `graph`."""
        ...


@dataclass(frozen=True)
class Rewrite:
    """One applied rewrite: the match and the graph it produced."""

    match: Match
    graph: ComputeGraph


def apply_all(graph: ComputeGraph, rules: Sequence[Rule], ctx: RuleContext,
              max_steps: int = 10_000) -> tuple[ComputeGraph, list[Rewrite]]:
    """Apply the rules until none matches (a fixpoint): in passes over `rules` in the order
    given, each rule's matches found on the graph of that moment applied in turn (a match an
    earlier one has undone is skipped: `apply` re-checks its pattern). Used by the ``fuse`` and
    ``fission`` stages, whose rules only ever help; the ``substitute`` stage searches instead
    (`search.substitution.search`). One `find` per rule and pass, not per rewrite, keeps it
    near linear in the network's size."""
    done: list[Rewrite] = []
    while True:
        before = len(done)
        for rule in rules:
            for match in rule.find(graph, ctx):
                try:
                    graph = rule.apply(graph, match)
                except RewriteError:
                    continue
                done.append(Rewrite(match, graph))
                if len(done) > max_steps:
                    raise RewriteError(f"graph {graph.name!r}: rewriting did not reach a "
                                       f"fixpoint in {max_steps} steps")
        if len(done) == before:
            return graph, done


def replay(graph: ComputeGraph, matches: Sequence[Match],
           rules: Mapping[str, Rule]) -> ComputeGraph:
    """`graph` after the recorded `matches`, in order (a plan's rewrites replayed on its model);
    raises `RewriteError` naming the first one that does not apply."""
    for k, m in enumerate(matches):
        rule = rules.get(m.rule)
        if rule is None:
            raise RewriteError(f"recorded rewrite {k + 1} names unknown rule {m.rule!r} "
                               f"(known: {', '.join(sorted(rules))})")
        graph = rule.apply(graph, m)
    return graph

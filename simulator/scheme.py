"""The fusion dataflows (`Scheme`): their names, what each can do, and the cast from user input.

A scheme is a `StrEnum`, so it compares equal to its name and is written as the bare name
("lbdf", "brr", "lbl", "hybrid") in JSON, CSV and messages. ``hybrid`` is not a dataflow of its
own: each group of a hybrid plan runs under the member dataflow that costs it least
(`Scheme.members`; `simulator.cost.hybrid`). Strings are cast once, where they enter
(`Scheme.parse`); past that point code asks the scheme's capabilities instead of comparing
names. The cost model of each scheme is registered in `simulator.cost.COST_MODELS`.
"""

from __future__ import annotations

from enum import StrEnum

from simulator.errors import InputError

__all__ = ["FUSED_SCHEMES", "SEARCHABLE_SCHEMES", "Scheme"]


class Scheme(StrEnum):
    """A dataflow: line-buffer depth-first, weight-streaming row tiles, layer by layer, or a
    hybrid of them (each group its own)."""

    LBDF = "lbdf"
    BRR = "brr"
    LBL = "lbl"
    HYBRID = "hybrid"

    @classmethod
    def parse(cls, value: str | Scheme, choices: tuple[Scheme, ...] | None = None) -> Scheme:
        """The scheme named `value` (case-insensitive), among `choices` (default: all).

        Raises:
            InputError: `value` names no scheme, or none of `choices` (quoted, with the
                choices).
        """
        allowed = tuple(cls) if choices is None else choices
        name = str(value).strip().lower()
        for scheme in allowed:
            if scheme.value == name:
                return scheme
        known = name in {s.value for s in cls}
        raise InputError(f"{'scheme' if known else 'unknown scheme'} {str(value)!r}"
                         f"{' is not supported here' if known else ''}; choose one of "
                         f"{', '.join(s.value for s in allowed)}")

    @property
    def searchable(self) -> bool:
        """True when plans can differ: ops may share a group (LBL runs every op alone)."""
        return self is not Scheme.LBL

    @property
    def tiled(self) -> bool:
        """True when a group runs in row tiles with weights streamed or resident (BRR)."""
        return self is Scheme.BRR

    @property
    def holds_weights(self) -> bool:
        """True when every group keeps all its weights on chip (LBDF): F_beta >= weights."""
        return self is Scheme.LBDF

    @property
    def mixed(self) -> bool:
        """True when each group of a plan chooses its own dataflow among `members`."""
        return self is Scheme.HYBRID

    @property
    def members(self) -> tuple[Scheme, ...]:
        """The dataflows a group may run under: itself, or a hybrid's (a group of two or more
        ops only under the fused ones; an op on its own layer by layer too)."""
        return (Scheme.LBDF, Scheme.BRR, Scheme.LBL) if self.mixed else (self,)

    @property
    def fused(self) -> tuple[Scheme, ...]:
        """The members that fuse ops into groups: an op no one of them runs alone is
        unfusable (`simulator.cost.CostCache.unfusable`)."""
        return tuple(s for s in self.members if s.searchable)


FUSED_SCHEMES: tuple[Scheme, ...] = tuple(s for s in Scheme if s.searchable and not s.mixed)
"""The dataflows that fuse ops into groups: what every search and repair, and the validity
GNN, take."""

SEARCHABLE_SCHEMES: tuple[Scheme, ...] = tuple(s for s in Scheme if s.searchable)
"""The schemes a search takes: the fused dataflows and the hybrid of them (a repair guided by
the validity GNN takes only the dataflows it was trained on)."""

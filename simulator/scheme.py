"""The fusion dataflows (`Scheme`): their names, what each can do, and the cast from user input.

A scheme is a `StrEnum`, so it compares equal to its name and is written as the bare name
("lbdf", "brr", "lbl") in JSON, CSV and messages. Strings are cast once, where they enter
(`Scheme.parse`); past that point code asks the scheme's capabilities instead of comparing
names. The cost model of each scheme is registered in `simulator.cost.COST_MODELS`.
"""

from __future__ import annotations

from enum import StrEnum

from simulator.errors import InputError

__all__ = ["FUSED_SCHEMES", "Scheme"]


class Scheme(StrEnum):
    """A dataflow: line-buffer depth-first, weight-streaming row tiles, or layer by layer."""

    LBDF = "lbdf"
    BRR = "brr"
    LBL = "lbl"

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


FUSED_SCHEMES: tuple[Scheme, ...] = tuple(s for s in Scheme if s.searchable)
"""The schemes that fuse ops into groups: what a search, a repair or the validity GNN takes."""

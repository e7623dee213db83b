"""The names of the fusion dataflows (`Scheme`), what each can do, and the cast from user input.

A scheme is a string, interned per name: it compares equal to its name and is written as the
bare name ("lbdf", "brr", "lbl", "hybrid") in JSON, CSV and messages. Each carries the
capabilities its dataflow declares (`Capabilities`: fuses, tiled, holds its weights, mixes
members, has a validity GNN, costs a group from the group alone), which is what code past the
edge asks instead of comparing names. Strings are cast once, where they enter
(`Scheme.parse`).

This module is the registry of the names: the built-in dataflows are declared here, and a new
one is declared by its `simulator.dataflow.Dataflow` when it is registered
(`simulator.dataflow.register`). What a dataflow *does* (its group cost, its simulator runner,
the per-group figures it reports, the networks its validity GNN trains on) lives in its module
of `simulator.dataflow`. ``hybrid`` is not a dataflow of its own: each group of a hybrid plan
runs under the member dataflow that costs it least (`Scheme.members`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from simulator.errors import InputError

__all__ = ["DEFAULT_SCHEME", "FUSED_SCHEMES", "SEARCHABLE_SCHEMES", "Capabilities", "Scheme",
           "fused_schemes", "searchable_schemes"]


@dataclass(frozen=True)
class Capabilities:
    """What a dataflow can do, as the rest of the code asks it.

    Attributes:
        fuses: Ops may share a group (a search has plans to choose from; LBL: False).
        tiled: A group runs in row tiles with weights streamed or resident (BRR): whole-map
            broadcasts make a group incompatible, and the exact solver's tile floors apply.
        holds_weights: Every group keeps all its weights on chip (LBDF): F_beta >= weights,
            which the exact solver prunes on.
        members: The dataflows a mixed scheme's groups choose among (names; empty: the scheme
            is a dataflow of its own).
        gnn: A validity GNN (and checkpoint) is trained for it: the GNN-guided repairs and
            the explainers take it.
        local: A group's cost depends on the group alone (not on the rest of the graph), so
            equal groups of different graphs share it (the substitution search's memo).
    """

    fuses: bool = True
    tiled: bool = False
    holds_weights: bool = False
    members: tuple[str, ...] = ()
    gnn: bool = False
    local: bool = False


class _Registry(type):
    """Iterating `Scheme` gives every declared scheme, in declaration order."""

    def __iter__(cls) -> Iterator[Scheme]:
        return iter(tuple(cls._declared.values()))  # type: ignore[attr-defined]

    def __len__(cls) -> int:
        return len(cls._declared)  # type: ignore[attr-defined]


class Scheme(str, metaclass=_Registry):
    """A dataflow's name: line-buffer depth-first, weight-streaming row tiles, layer by layer,
    a hybrid of them (each group its own), or one registered later."""

    __slots__ = ()
    _declared: ClassVar[dict[str, Scheme]] = {}
    _caps: ClassVar[dict[str, Capabilities]] = {}
    _withdrawn: ClassVar[dict[str, tuple[Scheme, Capabilities]]] = {}

    LBDF: ClassVar[Scheme]
    BRR: ClassVar[Scheme]
    LBL: ClassVar[Scheme]
    HYBRID: ClassVar[Scheme]

    def __new__(cls, value: str) -> Scheme:
        known = cls._declared.get(str(value))
        if known is None:
            raise ValueError(f"{value!r} is not a declared scheme")
        return known

    def __reduce__(self) -> tuple[Any, ...]:
        return (Scheme, (str(self),))

    def __repr__(self) -> str:
        return f"Scheme({str(self)!r})"

    def __copy__(self) -> Scheme:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Scheme:
        return self

    @classmethod
    def declare(cls, name: str, capabilities: Capabilities) -> Scheme:
        """The scheme called `name` (lower case), declared with `capabilities`.

        Raises:
            ValueError: the name is not lower case, or is declared with other capabilities.
        """
        if not name or name != name.strip().lower():
            raise ValueError(f"a scheme name is lower case without spaces, got {name!r}")
        known = cls._declared.get(name)
        if known is not None:
            if cls._caps[name] != capabilities:
                raise ValueError(f"scheme {name!r} is declared already, with other capabilities")
            return known
        scheme = str.__new__(cls, name)
        cls._declared[name] = scheme
        cls._caps[name] = capabilities
        return scheme

    @classmethod
    def withdraw(cls, name: str) -> None:
        """Withdraw the scheme called `name` (its dataflow unregistered): it is no longer
        parsed or listed until `reinstate`d."""
        if name in cls._declared:
            cls._withdrawn[name] = (cls._declared.pop(name), cls._caps.pop(name))

    @classmethod
    def reinstate(cls, scheme: Scheme) -> None:
        """Declare a withdrawn scheme again, the same object with the same capabilities."""
        held = cls._withdrawn.pop(str(scheme), None)
        if held is not None:
            cls._declared[str(scheme)], cls._caps[str(scheme)] = held

    @classmethod
    def parse(cls, value: str | Scheme, choices: tuple[Scheme, ...] | None = None) -> Scheme:
        """The scheme named `value` (case-insensitive), among `choices` (default: all).

        Raises:
            InputError: `value` names no scheme, or none of `choices` (quoted, with the
                choices).
        """
        if cls._declared.get(value) is value and (choices is None or value in choices):
            return value  # cast already
        allowed = tuple(cls) if choices is None else choices
        name = str(value).strip().lower()
        for scheme in allowed:
            if scheme == name:
                return scheme
        known = name in cls._declared
        raise InputError(f"{'scheme' if known else 'unknown scheme'} {str(value)!r}"
                         f"{' is not supported here' if known else ''}; choose one of "
                         f"{', '.join(allowed)}")

    @property
    def value(self) -> str:
        """The bare name."""
        return str(self)

    @property
    def capabilities(self) -> Capabilities:
        """What the dataflow declared it can do."""
        return self._caps[str(self)]

    @property
    def searchable(self) -> bool:
        """True when plans can differ: ops may share a group (LBL runs every op alone)."""
        return self.capabilities.fuses

    @property
    def tiled(self) -> bool:
        """True when a group runs in row tiles with weights streamed or resident (BRR)."""
        return self.capabilities.tiled

    @property
    def holds_weights(self) -> bool:
        """True when every group keeps all its weights on chip (LBDF): F_beta >= weights."""
        return self.capabilities.holds_weights

    @property
    def mixed(self) -> bool:
        """True when each group of a plan chooses its own dataflow among `members`."""
        return bool(self.capabilities.members)

    @property
    def members(self) -> tuple[Scheme, ...]:
        """The dataflows a group may run under: itself, or a mixed scheme's (a group of two or
        more ops only under the fused ones; an op on its own under every one)."""
        names = self.capabilities.members
        return tuple(Scheme(n) for n in names) if names else (self,)

    @property
    def fused(self) -> tuple[Scheme, ...]:
        """The members that fuse ops into groups: an op no one of them runs alone is
        unfusable (`simulator.cost.CostCache.unfusable`)."""
        return tuple(s for s in self.members if s.searchable)


Scheme.LBDF = Scheme.declare("lbdf", Capabilities(holds_weights=True, gnn=True, local=True))
Scheme.BRR = Scheme.declare("brr", Capabilities(tiled=True, gnn=True))
Scheme.LBL = Scheme.declare("lbl", Capabilities(fuses=False, local=True))
Scheme.HYBRID = Scheme.declare("hybrid", Capabilities(members=("lbdf", "brr", "lbl")))

DEFAULT_SCHEME: Scheme = Scheme.LBDF
"""The dataflow of a run that names none."""


def fused_schemes() -> tuple[Scheme, ...]:
    """The dataflows with a validity GNN: what the GNN-guided repairs and explainers take."""
    return tuple(s for s in Scheme if s.capabilities.gnn)


def searchable_schemes() -> tuple[Scheme, ...]:
    """Every scheme a search takes (the fusing dataflows, mixed ones included)."""
    return tuple(s for s in Scheme if s.searchable)


FUSED_SCHEMES: tuple[Scheme, ...] = fused_schemes()
"""The built-in dataflows with a validity GNN (LBDF, BRR); `fused_schemes()` adds those
registered later."""

SEARCHABLE_SCHEMES: tuple[Scheme, ...] = searchable_schemes()
"""The built-in schemes a search takes (LBDF, BRR, hybrid); `searchable_schemes()` adds those
registered later."""

"""The graph rewrite rules, by registry name (`RULES`), in the order the stages try them.

==========================  =========  ==============================================
rule                        stage      module
==========================  =========  ==============================================
eliminate-identity          fuse       `eliminate` (DNNFusion §4.4.2)
eliminate-slice-concat      fuse       `eliminate`
eliminate-concat-slices     fuse       `eliminate` (OCGGS Fig. 1c)
algebraic-*                 fuse       `algebraic` (DNNFusion §4.2, Table 4)
fuse-one-to-one             fuse       `fuse` (DNNFusion §4.2 Table 3, §4.3)
fission-*                   fission    `fission` (operator fission into slices/bands)
decompose-*                 substitute `decompose` (operator fission §2, primitives)
horizontal                  substitute `horizontal` (OCGGS Fig. 1, kernel enlarging)
==========================  =========  ==============================================

The ``fuse`` and ``fission`` stages apply their rules to a fixpoint in this order
(`search.substitution.base.apply_all`): eliminations and algebraic simplifications first, so
that fusion sees the simplified graph. Rule modules import no torch at import time; their
``transform`` methods do.
"""

from __future__ import annotations

from search.substitution.base import Rule
from search.substitution.rules.algebraic import (
    AffineChain,
    IdempotentActivation,
    IdentityArithmetic,
    ReshapeChain,
    TransposeChain,
)
from search.substitution.rules.decompose import HARDSWISH, SILU, DecomposeSoftmax
from search.substitution.rules.eliminate import ConcatOfSlices, Identity, SliceOfConcat
from search.substitution.rules.fission import IN_CHANNELS, OUT_CHANNELS, ROWS
from search.substitution.rules.fuse import FuseOneToOne
from search.substitution.rules.horizontal import HorizontalFusion

__all__ = ["FISSION_RULES", "FUSE_RULES", "RULES", "SUBSTITUTE_RULES"]

FUSE_RULES: tuple[Rule, ...] = (
    Identity(), SliceOfConcat(), ConcatOfSlices(),
    IdentityArithmetic(), IdempotentActivation(), AffineChain(), ReshapeChain(),
    TransposeChain(),
    FuseOneToOne(),
)
"""The ``fuse`` stage's rules, in the order `apply_all` tries them."""

FISSION_RULES: tuple[Rule, ...] = (OUT_CHANNELS, IN_CHANNELS, ROWS)
"""The ``fission`` stage's rules (operator fission into channel slices and row bands): the
`fission` module's rules go here."""

SUBSTITUTE_RULES: tuple[Rule, ...] = (SILU, HARDSWISH, DecomposeSoftmax(), HorizontalFusion())
"""Rules only the ``substitute`` stage's search applies (they may add ops or MACs)."""

RULES: dict[str, Rule] = {r.name: r for r in (*FUSE_RULES, *FISSION_RULES, *SUBSTITUTE_RULES)}
"""Every rule by registry name (`Match.rule`)."""

"""Symbolic shapes: rank and dimension propagation (RDP) over the IR, and binding the symbols.

After SoD (Niu et al., "SoD: Statically Optimizing Dynamic Deep Neural Network Execution"):
a graph's network input gets symbolic dimensions (``(1, 3, H, W)``, ``(N, L)``), and a forward
data-flow pass with one transfer function per op kind carries every tensor shape as a sympy
expression over those symbols: known constants, symbolic constants and operations on them
(``floor((H - 1)/2) + 1`` after a stride-2 convolution). Each op is classified by dynamism
with the paper's four categories (`Dynamism`).

`propagate(graph, (1, 3, "H", "W"))` takes a concrete graph, imported at some *reference*
shape (here H and W are read off the graph's input), and returns a `SymbolicGraph`;
`bind(symbolic, {"H": 512, "W": 512})` returns the concrete `ComputeGraph` at that binding,
every shape-dependent field recomputed (input and output shapes, MACs, a global pool's
window, an adaptive pool's window, ``auto_pad`` padding, the DNNFusion mapping of a
broadcasting elementwise op), ops that become identities dropped as the importers drop them;
weights never change. `load_symbolic` imports a model (zoo, ``module:callable``, ONNX with
named dynamic dimensions, graph JSON) at a reference shape and propagates it; `load_bound`
is the command line's ``--input-shape 1,3,H,W --bind H=512,W=512``.

The transfer functions read only `Op` fields and attrs; what a shape depends on besides the
op's inputs is recorded by the importers: a resize's ``scale``, ``size`` or ``size_of`` (the
tensor whose spatial size it takes), a pool's ``ceil_mode`` and ``adaptive``, ONNX
``auto_pad``, slice bounds, concat axes, permutations. Propagation checks itself: every shape
and MAC count must evaluate to the imported graph's at the reference binding, so an importer
that lost what a shape depends on is reported, not silently mis-bound. docs/symbolic-shapes.md
has the semantics, the classification, the CLI and a worked example.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from fractions import Fraction
from functools import reduce
from pathlib import Path
from typing import Any

import sympy

from simulator import limits
from simulator.errors import InputError
from simulator.workload.errors import InputShapeError
from simulator.workload.graph import (
    ComputeGraph,
    Op,
    OpKind,
    Shape,
    default_mapping,
    input_ref,
    is_network_input,
    network_input_index,
)
from simulator.workload.ops import adaptive_window, const_operand_shape

__all__ = [
    "BindingError",
    "Dynamism",
    "SymShape",
    "SymbolicGraph",
    "SymbolicOp",
    "SymbolicShapeError",
    "bind",
    "classify",
    "has_symbols",
    "load_bound",
    "load_symbolic",
    "parse_bindings",
    "parse_symbolic_shape",
    "propagate",
    "reference_shape",
    "shape_text",
]

SymShape = tuple[sympy.Expr, ...]
Dims = tuple[int | str, ...]  # a declared shape: ints and symbol names

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ALIGN = 32  # reference values are multiples of this (strides of 32 divide them)


class SymbolicShapeError(InputError):
    """A graph whose shapes cannot follow its symbols (a fixed linear layer after a symbolic
    map, an opaque op on a symbolic tensor, a shape the importer did not record what it
    depends on); the message names the op and the symbols."""


class BindingError(InputError):
    """A bad binding: a missing or unknown symbol, a value that is not a positive integer, or
    one that makes a dimension non-positive, fractional or inconsistent (named op and
    symbol)."""


class Dynamism(StrEnum):
    """SoD's classification of operators by dynamism (Section 3, Table 2), by its names.

    * Input Shape Determined Output (ISDO): the output's shape *and values* follow from the
      input shapes (ONNX Shape, ConstantOfShape, EyeLike). The IR folds such shape-only
      subgraphs into the attrs of the op they feed (a resize's ``size_of``), so no IR op has
      this class.
    * Input Shape Determined Output Shape (ISDOS): the output shape follows from the input
      shapes and attributes (Conv, pooling, elementwise with broadcast, Concat, MatMul,
      Softmax, Reduce).
    * Input Shape & Value Determined Output Shape (ISVDOS): the output shape also depends on
      the values of some inputs (Reshape's shape, Resize's scales/sizes, Slice's starts/ends,
      Pad's pads; GroupNormalization in the paper's table). In the IR these values are
      constants recorded by the importer (run-time values are refused at import), so RDP
      resolves them statically, as the paper notes for constant value inputs.
    * Execution Determined Output (EDO): the output shape is known only after executing the
      op (NonZero, If, Loop); here an opaque op, whose shape the importer measured by running
      the model at the reference input.
    """

    INPUT_SHAPE_DETERMINED_OUTPUT = "Input Shape Determined Output"
    INPUT_SHAPE_DETERMINED_OUTPUT_SHAPE = "Input Shape Determined Output Shape"
    INPUT_SHAPE_AND_VALUE_DETERMINED_OUTPUT_SHAPE = "Input Shape & Value Determined Output Shape"
    EXECUTION_DETERMINED_OUTPUT = "Execution Determined Output"

    @property
    def abbreviation(self) -> str:
        """ISDO, ISDOS, ISVDOS or EDO."""
        return {"Input Shape Determined Output": "ISDO",
                "Input Shape Determined Output Shape": "ISDOS",
                "Input Shape & Value Determined Output Shape": "ISVDOS",
                "Execution Determined Output": "EDO"}[self.value]


_VALUE_DETERMINED = frozenset({OpKind.RESHAPE, OpKind.RESIZE, OpKind.SLICE, OpKind.PAD})


def classify(op: Op) -> Dynamism:
    """The SoD dynamism class of `op` (by its ONNX counterpart's signature, as the paper's
    Table 2 classifies operators)."""
    if op.kind is OpKind.OPAQUE:
        return Dynamism.EXECUTION_DETERMINED_OUTPUT
    if op.kind in _VALUE_DETERMINED or (op.kind is OpKind.NORM and op.op_type == "groupnorm"):
        return Dynamism.INPUT_SHAPE_AND_VALUE_DETERMINED_OUTPUT_SHAPE
    return Dynamism.INPUT_SHAPE_DETERMINED_OUTPUT_SHAPE


# --- parsing --------------------------------------------------------------------------------


def parse_symbolic_shape(shape: str | Sequence[int | str]) -> Dims:
    """A shape whose dimensions are positive integers or symbol names: ``"1,3,H,W"``.

    Raises:
        InputShapeError: an empty shape, a dimension that is neither, or a non-positive one.
    """
    text = shape if isinstance(shape, str) else ",".join(str(s) for s in shape)
    parts = [p.strip() for p in text.split(",")]
    dims: list[int | str] = []
    for part in parts:
        if re.fullmatch(r"[+-]?\d+", part):
            if int(part) <= 0:
                raise InputShapeError(f"input shape {text!r} must have positive dimensions")
            dims.append(int(part))
        elif _NAME.match(part):
            dims.append(part)
        else:
            raise InputShapeError(f"input shape {text!r}: {part!r} is neither a positive "
                                  "integer nor a symbol name (expected e.g. 1,3,H,W)")
    return tuple(dims)


def has_symbols(shape: str | Sequence[int | str] | None) -> bool:
    """True if `shape` names a symbol (``1,3,H,W``); False for None or an integer shape."""
    if shape is None:
        return False
    parts = shape.split(",") if isinstance(shape, str) else [str(s) for s in shape]
    return any(_NAME.match(p.strip()) for p in parts)


def parse_bindings(text: str | Mapping[str, Any]) -> dict[str, int]:
    """Symbol values from ``"H=512,W=512"`` (or a mapping), each checked to be a positive
    integer.

    Raises:
        BindingError: an item that is not NAME=VALUE, a bad name, a repeated symbol, or a
            value that is not a positive integer.
    """
    items = list(text.items()) if isinstance(text, Mapping) else [
        _binding_item(item) for item in str(text).split(",") if item.strip()]
    if not items:
        raise BindingError(f"--bind {text!r}: no NAME=VALUE items")
    values: dict[str, int] = {}
    for name, raw in items:
        if name in values:
            raise BindingError(f"--bind: symbol {name!r} is bound twice")
        values[name] = _positive_int(name, raw)
    return values


def _binding_item(item: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    name = name.strip()
    if not sep or not _NAME.match(name):
        raise BindingError(f"--bind item {item.strip()!r} is not NAME=VALUE (e.g. H=512)")
    return name, value.strip()


def _positive_int(name: str, raw: Any) -> int:
    if isinstance(raw, bool):
        value = None
    elif isinstance(raw, int):
        value = raw
    elif isinstance(raw, float) and raw.is_integer():
        value = int(raw)
    elif isinstance(raw, str) and re.fullmatch(r"\s*[+-]?\d+\s*", raw):
        value = int(raw)
    else:
        value = None
    if value is None or value <= 0:
        raise BindingError(f"--bind {name}={raw}: a dimension must be a positive integer")
    return value


def shape_text(shape: Iterable[Any]) -> str:
    """``(1, 3, H, W)``; expressions as sympy prints them."""
    return "(" + ", ".join(str(d) for d in shape) + ")"


# --- symbolic ops and graphs ----------------------------------------------------------------


@dataclass(frozen=True)
class SymbolicOp:
    """An op of a `SymbolicGraph`: the imported op and its shapes as expressions.

    Attributes:
        op: The op as imported at the reference shape.
        input_shapes: Its input shapes, as expressions over the graph's symbols.
        output_shape: Its output shape, as expressions.
        macs: Its multiply-accumulates, as an expression.
        dynamism: Its SoD class (`classify`).
        rule: The transfer function that gave its shape (``window``, ``broadcast``,
            ``reshape``, ... or ``static`` when no input depends on a symbol).
    """

    op: Op
    input_shapes: tuple[SymShape, ...]
    output_shape: SymShape
    macs: sympy.Expr
    dynamism: Dynamism
    rule: str

    @property
    def symbols(self) -> tuple[str, ...]:
        """The symbols its output shape depends on, sorted."""
        return _names(self.output_shape)

    @property
    def is_static(self) -> bool:
        """True when its output shape is the same at every binding."""
        return not self.symbols


@dataclass(frozen=True)
class _Constraint:
    """Two dimensions that must agree at a binding (RDP could not prove them equal)."""

    op: str
    what: str
    left: sympy.Expr
    right: sympy.Expr


@dataclass(frozen=True)
class SymbolicGraph:
    """A `ComputeGraph` whose shapes are expressions over symbols (the result of `propagate`).

    Attributes:
        graph: The graph as imported at the reference shape.
        input_shapes: The network inputs' shapes as expressions.
        ops: One `SymbolicOp` per op of `graph`, in its order.
        symbols: The symbol names, in order of first appearance in the input shape.
        reference: The value of each symbol in `graph` (sorted pairs).
        constraints: Dimensions that must agree at any binding (checked by `bind`).
    """

    graph: ComputeGraph
    input_shapes: tuple[SymShape, ...]
    ops: tuple[SymbolicOp, ...]
    symbols: tuple[str, ...]
    reference: tuple[tuple[str, int], ...]
    constraints: tuple[_Constraint, ...] = ()

    @property
    def name(self) -> str:
        """The network's name."""
        return self.graph.name

    def op(self, name: str) -> SymbolicOp:
        """The symbolic op called `name` (KeyError if there is none)."""
        return self.ops[self.graph.id_of(name)]

    def dynamism(self) -> dict[str, Dynamism]:
        """Every op's SoD class, by op name."""
        return {s.op.name: s.dynamism for s in self.ops}

    def rows(self) -> list[dict[str, Any]]:
        """One row per op: id, name, kind, SoD class, rule, output shape and MACs as text."""
        return [{"id": s.op.id, "name": s.op.name, "kind": s.op.kind.value,
                 "dynamism": s.dynamism.abbreviation, "rule": s.rule,
                 "output_shape": shape_text(s.output_shape), "macs": str(s.macs)}
                for s in self.ops]

    def bind(self, values: Mapping[str, Any] | str) -> ComputeGraph:
        """The concrete graph at a binding of every symbol (see module `bind`)."""
        return bind(self, values)


# --- propagation ----------------------------------------------------------------------------


class _NoRule(Exception):
    """A transfer function that cannot give this op's shape; the message says why."""


@dataclass
class _Context:
    """State of one propagation: shapes so far, name lookup, constraints, the reference."""

    graph: ComputeGraph
    shapes: dict[int, SymShape]
    by_name: dict[str, int]
    constraints: list[_Constraint]
    env: dict[sympy.Symbol, int]
    evaluator: _Evaluator

    def shape(self, ref: int) -> SymShape:
        return self.shapes[ref]


def _symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, positive=True)


def _static(shape: Iterable[int]) -> SymShape:
    return tuple(sympy.Integer(int(d)) for d in shape)


def _names(exprs: Iterable[sympy.Expr]) -> tuple[str, ...]:
    return tuple(sorted({s.name for e in exprs for s in sympy.sympify(e).free_symbols}))


def _is_static(shape: Iterable[sympy.Expr]) -> bool:
    return not _names(shape)


def propagate(graph: ComputeGraph, input_shape: str | Sequence[int | str]) -> SymbolicGraph:
    """Propagate a symbolic shape of `graph`'s first network input through every op.

    Args:
        graph: A concrete graph (imported at the reference shape); its other inputs stay
            static.
        input_shape: The first input's shape with symbol names where it varies, e.g.
            ``(1, 3, "H", "W")`` or ``"N,L"``. Its integers must equal the graph's; each
            symbol's reference value is read off the graph's input.

    Returns:
        The symbolic graph (every op's shapes, MACs and SoD class).

    Raises:
        InputShapeError: a malformed shape, or one of another rank than the input.
        SymbolicShapeError: a shape that cannot follow the symbols (named op and symbols),
            or integers that differ from the graph's input.
    """
    dims = parse_symbolic_shape(input_shape)
    concrete = graph.input_shapes[0]
    where = f"input {graph.input_names[0]!r} of {graph.name!r}"
    if len(dims) != len(concrete):
        raise InputShapeError(f"symbolic shape {shape_text(dims)} has rank {len(dims)}; "
                              f"{where} has shape {shape_text(concrete)}")
    reference: dict[str, int] = {}
    for i, (d, c) in enumerate(zip(dims, concrete, strict=True)):
        if isinstance(d, int) and d != c:
            raise SymbolicShapeError(f"{where} has dimension {i} = {c}, not {d}")
        if isinstance(d, str) and reference.setdefault(d, c) != c:
            raise SymbolicShapeError(f"symbol {d} stands for dimensions {reference[d]} and {c} "
                                     f"of {where}")
    symbols = {name: _symbol(name) for name in reference}
    env = {symbols[n]: v for n, v in reference.items()}
    first = tuple(symbols[d] if isinstance(d, str) else sympy.Integer(d) for d in dims)
    inputs = (first, *(_static(s) for s in graph.input_shapes[1:]))
    ctx = _Context(graph, {input_ref(k): s for k, s in enumerate(inputs)},
                   {n: input_ref(k) for k, n in enumerate(graph.input_names)}, [],
                   env, _Evaluator(env))
    ops: list[SymbolicOp] = []
    for op in graph.ops:
        ctx.by_name.setdefault(op.name, op.id)
        sym = _propagate_op(ctx, op)
        _check_reference(ctx, sym)
        ctx.shapes[op.id] = sym.output_shape
        ops.append(sym)
    return SymbolicGraph(graph, inputs, tuple(ops), tuple(reference),
                         tuple(sorted(reference.items())), tuple(ctx.constraints))


def _reads_shapes(op: Op) -> bool:
    """True for an op whose output shape reads another tensor's shape (not an input)."""
    return op.kind is OpKind.RESIZE and op.attr("size_of") is not None


def _propagate_op(ctx: _Context, op: Op) -> SymbolicOp:
    ins = tuple(ctx.shape(r) for r in op.inputs)
    dynamism = classify(op)
    if all(_is_static(s) for s in ins) and not _reads_shapes(op):
        return SymbolicOp(op, ins, _static(op.output_shape), sympy.Integer(op.macs), dynamism,
                          "static")
    rule = _RULES.get(op.kind)
    depends = ", ".join(_names(e for s in ins for e in s))
    if rule is None:
        raise SymbolicShapeError(
            f"op {op.name!r} ({op.kind.value} {op.op_type}) has no symbolic shape rule: "
            + ("an opaque op's shape is known only at the imported input shape"
               if op.kind is OpKind.OPAQUE else "this kind is not supported")
            + f"; its input depends on {depends}")
    try:
        out, name = rule(ctx, op, ins)
    except _NoRule as why:
        raise SymbolicShapeError(f"op {op.name!r} ({op.kind.value} {op.op_type}): {why}; its "
                                 f"input {shape_text(ins[0]) if ins else '()'} depends on "
                                 f"{depends}") from None
    return SymbolicOp(op, ins, tuple(out), _macs(op, ins, tuple(out)), dynamism, name)


def _check_reference(ctx: _Context, sym: SymbolicOp) -> None:
    """The propagated shape and MACs must be the imported ones at the reference binding."""
    evaluator = ctx.evaluator
    op = sym.op
    got = tuple(evaluator.value(d) for d in sym.output_shape)
    macs = evaluator.value(sym.macs)
    if got != tuple(op.output_shape) or macs != op.macs:
        ref = ", ".join(f"{s}={v}" for s, v in ctx.env.items())
        what = (f"shape {shape_text(got)} where the import recorded "
                f"{shape_text(op.output_shape)}" if got != tuple(op.output_shape)
                else f"{macs} MACs where the import recorded {op.macs}")
        raise SymbolicShapeError(f"op {op.name!r} ({op.kind.value} {op.op_type}): RDP gives "
                                 f"{what} at the reference {ref}; the importer did not record "
                                 "what this shape depends on")


def _macs(op: Op, ins: Sequence[SymShape], out: SymShape) -> sympy.Expr:
    """MACs as an expression: a matmul's output elements x K; any other op's MACs per output
    element are fixed by its weights (conv, linear, unfolded BatchNorm) or zero."""
    if op.kind is OpKind.MATMUL:
        return sympy.Mul(*out) * ins[0][-1]
    if op.macs == 0:
        return sympy.Integer(0)
    per = Fraction(op.macs, math.prod(op.output_shape))
    if per.denominator != 1 and not _is_static(out):
        raise SymbolicShapeError(f"op {op.name!r} ({op.kind.value}): its {op.macs} MACs are "
                                 "not a whole number per output element, so they cannot "
                                 f"follow {', '.join(_names(out))}")
    return sympy.Mul(*out) * sympy.Rational(per.numerator, per.denominator)


# --- transfer functions ---------------------------------------------------------------------

Rule = Callable[[_Context, Op, tuple[SymShape, ...]], tuple[SymShape, str]]


def _same(a: sympy.Expr, b: sympy.Expr) -> bool:
    return a == b or sympy.simplify(a - b) == 0


def _unify(ctx: _Context, op: Op, a: sympy.Expr, b: sympy.Expr, what: str) -> sympy.Expr:
    """`a`, once `a` and `b` are known to agree: proven equal, or both symbolic (then a
    constraint `bind` checks). A fixed size against a symbolic one cannot agree in general."""
    if _same(a, b):
        return a
    if _is_static((a,)) or _is_static((b,)):
        raise _NoRule(f"{what}: {a} and {b} agree only at one binding (a size fixed by the "
                      "model against one that follows the symbols)")
    ctx.constraints.append(_Constraint(op.name, what, a, b))
    return a


def _broadcast(ctx: _Context, op: Op, shapes: Sequence[SymShape]) -> SymShape:
    """numpy broadcasting of symbolic shapes (fixed 1s stretch; symbolic sizes never do)."""
    rank = max(len(s) for s in shapes)
    padded = [(sympy.Integer(1),) * (rank - len(s)) + tuple(s) for s in shapes]
    out = []
    for axis, dims in enumerate(zip(*padded, strict=True)):
        sized = [d for d in dims if d != 1] or [sympy.Integer(1)]
        out.append(reduce(lambda a, b: _unify(ctx, op, a, b, f"operands' axis {axis}"), sized))
    return tuple(out)


def _preserve(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    return ins[0], "preserve"


def _norm(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    shape = ins[0]
    if op.weight_elems and op.op_type != "groupnorm":
        axes = op.attr("axes") or (-1,)
        axes = (axes,) if isinstance(axes, int) else tuple(axes)
        moving = _names(shape[a] for a in axes)
        if moving:
            raise _NoRule(f"its scale and shift cover the normalised axes {axes}, whose size "
                          f"follows {', '.join(moving)}, but its weights are fixed")
    if op.op_type == "groupnorm" and not _is_static(shape[1:2]):
        raise _NoRule("its channels follow the symbols, but its weights are fixed")
    return shape, "preserve"


def _unary(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    const = const_operand_shape(op)
    if const is None:
        return ins[0], "preserve"
    return _broadcast(ctx, op, [ins[0], _static(const)]), "broadcast"


def _binary(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    shapes = list(ins)
    const = op.attr("const_shape")
    if const is not None:
        shapes.append(_static(const))
    return _broadcast(ctx, op, shapes), "broadcast"


def _window(size: sympy.Expr, k: int, s: int, before: int, after: int, d: int,
            ceil_mode: bool) -> sympy.Expr:
    """Output length of a sliding window (PyTorch's rule, ceil mode's last-window rule too)."""
    span = size + before + after - d * (k - 1) - 1
    if not ceil_mode:
        return sympy.floor(span / s) + 1
    out = sympy.ceiling(span / s) + 1
    if before == 0 and s <= d * (k - 1) + 1:
        return out  # the last window always starts inside the input
    return sympy.Piecewise((out - 1, (out - 1) * s >= size + before), (out, True))


def _same_pad(size: sympy.Expr, s: int) -> sympy.Expr:
    return sympy.ceiling(size / s)


def _spatial(op: Op, ins: tuple[SymShape, ...], ceil_mode: bool) -> tuple[sympy.Expr, ...]:
    shape = ins[0]
    if len(shape) != 4:
        raise _NoRule(f"a window over a rank-{len(shape)} tensor")
    if op.attr("auto_pad") in ("SAME_UPPER", "SAME_LOWER"):
        return tuple(_same_pad(shape[2 + i], op.stride[i]) for i in range(2))
    top, left, bottom, right = op.padding
    return (_window(shape[2], op.kernel[0], op.stride[0], top, bottom, op.dilation[0], ceil_mode),
            _window(shape[3], op.kernel[1], op.stride[1], left, right, op.dilation[1],
                    ceil_mode))


def _conv(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    shape = ins[0]
    if len(shape) == 4 and not _is_static(shape[1:2]):
        raise _NoRule(f"its input channels {shape[1]} follow the symbols, but its weights are "
                      "fixed")
    return (shape[0], sympy.Integer(op.output_shape[1]), *_spatial(op, ins, False)), "window"


def _pool(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    shape = ins[0]
    if op.attr("adaptive"):
        if len(shape) != 4:
            raise _NoRule(f"adaptive pooling of a rank-{len(shape)} tensor")
        return (*shape[:2], *_static(op.output_shape[2:])), "adaptive window"
    return (*shape[:2], *_spatial(op, ins, bool(op.attr("ceil_mode")))), "window"


def _global_pool(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    shape = ins[0]
    if len(shape) != 4:
        raise _NoRule(f"global pooling of a rank-{len(shape)} tensor")
    ones = (sympy.Integer(1),) * (len(op.output_shape) - 2)
    return (*shape[:2], *ones), "global"


def _linear(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    shape = ins[0]
    if len(op.input_shapes[0]) != len(op.output_shape):
        raise _NoRule("a linear layer that changes the rank")
    if not _is_static(shape[-1:]):
        raise _NoRule(f"it reads {shape[-1]} features, which follow "
                      f"{', '.join(_names(shape[-1:]))}, but its weights are fixed at "
                      f"{op.input_shapes[0][-1]} inputs")
    return (*shape[:-1], sympy.Integer(op.output_shape[-1])), "linear"


def _matmul(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    if len(ins) != 2 or min(len(s) for s in ins) < 2:
        raise _NoRule("a matmul of operands of rank below 2")
    a, b = ins
    _unify(ctx, op, a[-1], b[-2], "the contracted dimension K")
    batch = _broadcast(ctx, op, [a[:-2], b[:-2]]) if len(a) > 2 or len(b) > 2 else ()
    return (*batch, a[-2], b[-1]), "matmul"


def _concat(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    axis = op.attr("axis")
    if axis is None:
        raise _NoRule("its axis is not recorded")
    rank = len(ins[0])
    out = list(ins[0])
    for other in ins[1:]:
        if len(other) != rank:
            raise _NoRule("inputs of different ranks")
        for i in range(rank):
            if i != axis:
                out[i] = _unify(ctx, op, out[i], other[i], f"inputs' axis {i}")
    for const in op.attr("const_shapes") or ():  # a constant operand (ViT's class token)
        for i in range(rank):
            if i != axis:
                out[i] = _unify(ctx, op, out[i], sympy.Integer(const[i]),
                                f"constant operand's axis {i}")
    extra = op.output_shape[axis] - sum(s[axis] for s in op.input_shapes)  # constant operands
    out[axis] = sympy.Add(*(s[axis] for s in ins)) + extra
    return tuple(out), "concat"


def _slice(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    """Fixed bounds, except an end at the reference length of a symbolic axis: "to the end"."""
    if op.attr("axis") is None:
        raise _NoRule("its bounds are not recorded")
    axes, starts, ends, steps = (_tuple(op.attr(k)) for k in ("axis", "start", "end", "step"))
    shape, ref = list(ins[0]), op.input_shapes[0]
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        size = shape[axis]
        if _is_static((size,)):
            shape[axis] = sympy.Integer(len(range(start, min(end, int(size)), step)))
            continue
        stop = size if end >= ref[axis] else sympy.Min(end, size)
        shape[axis] = sympy.ceiling((stop - start) / step)
    drop = len(shape) - len(op.output_shape)
    if drop:  # integer indexing removes its axes (each of length 1)
        single = [a for a in axes if shape[a] == 1]
        if len(single) != drop:
            raise _NoRule("which sliced axes it removes is not recorded")
        shape = [d for i, d in enumerate(shape) if i not in single]
    return tuple(shape), "slice"


def _tuple(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in value) if isinstance(value, (tuple, list)) else (int(value),)


def _groups(ref_in: Shape, ref_out: Shape) -> list[tuple[list[int], list[int]]] | None:
    """Runs of input and output axes with equal products, left to right (how a reshape
    regroups axes), or None when the shapes do not align."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(ref_in) or j < len(ref_out):
        gi: list[int] = []
        gj: list[int] = []
        pi = pj = 1
        if i < len(ref_in):
            gi.append(i)
            pi, i = pi * ref_in[i], i + 1
        if j < len(ref_out):
            gj.append(j)
            pj, j = pj * ref_out[j], j + 1
        while pi != pj:
            if pi < pj and i < len(ref_in):
                gi.append(i)
                pi, i = pi * ref_in[i], i + 1
            elif pj < pi and j < len(ref_out):
                gj.append(j)
                pj, j = pj * ref_out[j], j + 1
            else:
                return None
        groups.append((gi, gj))
    return groups


def _reshape(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    """Each run of output axes whose reference product is a run of input axes' follows that
    run's product: the "-1" of a view is solved symbolically, as RDP solves it."""
    src = ins[0]
    groups = _groups(op.input_shapes[0], op.output_shape)
    if groups is None:
        raise _NoRule("its input and output axes do not align")
    out: list[sympy.Expr] = [sympy.Integer(d) for d in op.output_shape]
    for gi, gj in groups:
        size = sympy.Mul(*(src[i] for i in gi))
        if _is_static((size,)):
            continue
        if not gj:
            _unify(ctx, op, size, sympy.Integer(1), "axes it removes")
            continue
        moving = [j for j in gj if op.output_shape[j] != 1] if len(gj) > 1 else gj
        if len(moving) != 1:
            raise _NoRule(f"it splits {size} into {shape_text(op.output_shape[j] for j in gj)}"
                          "; which part follows the symbols is not recorded")
        out[moving[0]] = size
    return tuple(out), "reshape"


def _transpose(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    shape = ins[0]
    if op.op_type == "channel_shuffle":
        return shape, "preserve"
    if op.op_type in ("pixel_shuffle", "pixel_unshuffle") and len(shape) == 4:
        r = op.attr("upscale_factor") or op.attr("downscale_factor")
        if not r:
            raise _NoRule("its factor is not recorded")
        scale = sympy.Integer(r) if op.op_type == "pixel_shuffle" else sympy.Rational(1, r)
        return (shape[0], sympy.Integer(op.output_shape[1]), shape[2] * scale,
                shape[3] * scale), "pixel shuffle"
    perm = op.attr("perm")
    if perm is None:
        raise _NoRule("its permutation is not recorded")
    return tuple(shape[p] for p in perm), "permute"


def _pad(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    shape = list(ins[0])
    top, left, bottom, right = op.padding
    shape[-1] += left + right
    if len(shape) > 1:
        shape[-2] += top + bottom
    return tuple(shape), "pad"


def _resize(ctx: _Context, op: Op, ins: tuple[SymShape, ...]) -> tuple[SymShape, str]:
    shape = ins[0]
    if len(shape) != 4:
        raise _NoRule(f"a resize of a rank-{len(shape)} tensor")
    source = op.attr("size_of")
    if source is not None:
        if source not in ctx.by_name:
            raise _NoRule(f"it takes the size of {source!r}, which is not a tensor of the graph")
        return (*shape[:2], *ctx.shape(ctx.by_name[source])[-2:]), "resize like"
    if op.attr("size") is not None:
        return (*shape[:2], *_static(_tuple(op.attr("size"))[-2:])), "resize to size"
    scale = op.attr("scale")
    if scale is None:
        raise _NoRule("its output size is neither recorded nor a recorded scale of its input")
    scales = tuple(scale) if isinstance(scale, (tuple, list)) else (scale, scale)
    return (*shape[:2], *(sympy.floor(d * sympy.Rational(Fraction(float(f))))
                          for d, f in zip(shape[2:], scales[-2:], strict=True))), "resize by scale"


_RULES: dict[OpKind, Rule] = {
    OpKind.CONV: _conv, OpKind.DWCONV: _conv, OpKind.POOL: _pool,
    OpKind.GLOBAL_POOL: _global_pool, OpKind.ELTWISE_UNARY: _unary,
    OpKind.ELTWISE_BINARY: _binary, OpKind.BATCHNORM: _preserve, OpKind.SOFTMAX: _preserve,
    OpKind.NORM: _norm, OpKind.CONCAT: _concat, OpKind.SLICE: _slice, OpKind.LINEAR: _linear,
    OpKind.MATMUL: _matmul, OpKind.RESIZE: _resize, OpKind.PAD: _pad,
    OpKind.RESHAPE: _reshape, OpKind.TRANSPOSE: _transpose,
}


# --- evaluation and binding -----------------------------------------------------------------


class _Evaluator:
    """Exact evaluation of the expressions RDP builds (ints and fractions, memoised)."""

    def __init__(self, env: Mapping[sympy.Symbol, int]) -> None:
        self.env = env
        self.memo: dict[sympy.Basic, Any] = {}

    def value(self, e: sympy.Basic) -> Any:
        """Exact value of `e`: an int when integral, else a Fraction (or a bool)."""
        if e in self.memo:
            return self.memo[e]
        v = self._compute(e)
        if isinstance(v, Fraction) and v.denominator == 1:
            v = v.numerator
        self.memo[e] = v
        return v

    def _compute(self, e: sympy.Basic) -> Any:  # noqa: PLR0911 - one case per node type
        if e.is_Integer:
            return int(e)
        if e.is_Rational:
            return Fraction(int(e.p), int(e.q))
        if e.is_Symbol:
            return self.env[e]
        if e.is_Add:
            return sum((self.value(a) for a in e.args), 0)
        if e.is_Mul:
            return math.prod((self.value(a) for a in e.args), start=1)
        if e.is_Pow:
            base, exp = self.value(e.args[0]), self.value(e.args[1])
            return Fraction(base) ** exp
        if isinstance(e, sympy.floor):
            return math.floor(self.value(e.args[0]))
        if isinstance(e, sympy.ceiling):
            return math.ceil(self.value(e.args[0]))
        if isinstance(e, sympy.Max):
            return max(self.value(a) for a in e.args)
        if isinstance(e, sympy.Min):
            return min(self.value(a) for a in e.args)
        if isinstance(e, sympy.Mod):
            return Fraction(self.value(e.args[0])) % Fraction(self.value(e.args[1]))
        if isinstance(e, sympy.Piecewise):
            return next(self.value(x) for x, cond in e.args if self.value(cond))
        if e is sympy.true or e is sympy.false:
            return bool(e)
        if isinstance(e, sympy.core.relational.Relational):
            return _RELATIONS[e.rel_op](self.value(e.lhs), self.value(e.rhs))
        raise TypeError(f"cannot evaluate {e} ({type(e).__name__})")


_RELATIONS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": lambda a, b: a >= b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b,
    "<": lambda a, b: a < b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


def _check_binding(graph: SymbolicGraph, values: Mapping[str, Any] | str) -> dict[str, int]:
    given = parse_bindings(values)
    known = ", ".join(graph.symbols) or "none"
    for name in given:
        if name not in graph.symbols:
            raise BindingError(f"symbol {name!r} is not a dimension of {graph.name!r} (its "
                               f"symbols: {known})")
    missing = [s for s in graph.symbols if s not in given]
    if missing:
        raise BindingError(f"symbol {missing[0]!r} of {graph.name!r} is not bound (its "
                           f"symbols: {known}; e.g. --bind "
                           + ",".join(f"{s}={v}" for s, v in graph.reference) + ")")
    return given


def bind(symbolic: SymbolicGraph, values: Mapping[str, Any] | str) -> ComputeGraph:
    """The concrete graph of `symbolic` at a binding of every symbol.

    Every shape-dependent field is recomputed: input and output shapes, MACs, a global pool's
    window (its input's H x W), an adaptive pool's window (`adaptive_window`), ``auto_pad``
    padding, and the DNNFusion mapping when it was the default one. Weights and every other
    field are the imported op's. An op that the binding makes an identity (a reshape or slice
    whose output is its input, an adaptive pool to its own size) is dropped and the ops are
    renumbered, as the importers drop such ops.

    Args:
        symbolic: The symbolic graph (`propagate`, `load_symbolic`).
        values: A value per symbol: ``{"H": 512, "W": 512}`` or ``"H=512,W=512"``.

    Raises:
        BindingError: a missing or unknown symbol, a value that is not a positive integer, a
            dimension the binding makes non-positive or fractional, or operands that must
            agree and do not (each names the op and the symbols).
    """
    given = _check_binding(symbolic, values)
    env = {_symbol(n): v for n, v in given.items()}
    evaluator = _Evaluator(env)
    text = ",".join(f"{n}={given[n]}" for n in symbolic.symbols)
    inputs = tuple(_dims(evaluator, s, text, f"network input {n!r}", s)
                   for n, s in zip(symbolic.graph.input_names, symbolic.input_shapes,
                                   strict=True))
    for shape in inputs:
        limits.check_input_size(shape, f"{','.join(map(str, shape))} ({text})", BindingError)
    for c in symbolic.constraints:
        left, right = evaluator.value(c.left), evaluator.value(c.right)
        if left != right:
            raise BindingError(f"{text}: op {c.op!r}: {c.what} must agree but are {left} and "
                               f"{right} (they depend on {', '.join(_names((c.left, c.right)))})")
    ops = []
    for sym in symbolic.ops:
        op = sym.op
        where = f"op {op.name!r} ({op.kind.value} {op.op_type})"
        out = _dims(evaluator, sym.output_shape, text, where, sym.output_shape)
        ins = tuple(inputs[network_input_index(r)] if is_network_input(r) else ops[r].output_shape
                    for r in op.inputs)
        macs = evaluator.value(sym.macs)
        ops.append(replace(op, input_shapes=ins, output_shape=out, macs=int(macs),
                           **_window_fields(op, ins, out)))
    return _without_identities(symbolic.graph, ops, inputs)


def _dims(evaluator: _Evaluator, shape: SymShape, text: str, where: str,
          exprs: SymShape) -> Shape:
    dims = []
    for axis, e in enumerate(shape):
        v = evaluator.value(e)
        if not isinstance(v, int) or v <= 0:
            what = "not a whole number" if not isinstance(v, int) else "not positive"
            raise BindingError(f"{text} makes dimension {axis} of {where} {v} ({what}; it is "
                               f"{e}, which depends on {', '.join(_names((e,)))})")
        dims.append(v)
    return tuple(dims)


def _window_fields(op: Op, ins: tuple[Shape, ...], out: Shape) -> dict[str, Any]:
    """The fields besides shapes and MACs that depend on the shapes, at a binding."""
    fields: dict[str, Any] = {}
    shape = ins[0] if ins else ()
    if op.kind is OpKind.GLOBAL_POOL and len(shape) == 4:
        fields["kernel"] = fields["stride"] = (shape[2], shape[3])
    elif op.kind is OpKind.POOL and op.attr("adaptive") and len(shape) == 4:
        (kh, sh), (kw, sw) = (adaptive_window(shape[2 + i], out[2 + i]) for i in range(2))
        fields.update(kernel=(kh, kw), stride=(sh, sw))
    if op.attr("auto_pad") in ("SAME_UPPER", "SAME_LOWER") and len(shape) == 4:
        fields["padding"] = _same_padding(op, shape[2:], op.attr("auto_pad"))
    if op.mapping == default_mapping(op.kind, op.input_shapes, op.output_shape):
        fields["mapping"] = default_mapping(op.kind, ins, out)
    return fields


def _same_padding(op: Op, spatial: Sequence[int], auto: str) -> tuple[int, int, int, int]:
    """ONNX ``auto_pad`` SAME padding at these spatial sizes (as the ONNX importer resolves
    it)."""
    total = [max(0, (-(-i // s) - 1) * s + (k - 1) * d + 1 - i)
             for i, k, s, d in zip(spatial, op.kernel, op.stride, op.dilation, strict=True)]
    small, big = [t // 2 for t in total], [t - t // 2 for t in total]
    begin, end = (small, big) if auto == "SAME_UPPER" else (big, small)
    return begin[0], begin[1], end[0], end[1]


def _is_identity(op: Op) -> bool:
    """A reshape or slice whose output is its input, or an adaptive pool to its own size: the
    importers drop such ops."""
    if not op.inputs or op.output_shape != op.input_shapes[0]:
        return False
    return op.kind in (OpKind.RESHAPE, OpKind.SLICE) or (
        op.kind is OpKind.POOL and bool(op.attr("adaptive")))


def _without_identities(template: ComputeGraph, ops: list[Op],
                        inputs: tuple[Shape, ...]) -> ComputeGraph:
    outputs = set(template.outputs)
    target: dict[int, int] = {}  # old id -> new reference
    kept: list[Op] = []
    for op in ops:
        if _is_identity(op) and op.id not in outputs:
            source = op.inputs[0]
            target[op.id] = target[source] if source >= 0 else source
            continue
        new_inputs = tuple(target[r] if r >= 0 else r for r in op.inputs)
        target[op.id] = len(kept)
        kept.append(replace(op, id=len(kept), inputs=new_inputs))
    return ComputeGraph(name=template.name, ops=tuple(kept), input_shapes=inputs,
                        outputs=tuple(target[o] for o in template.outputs),
                        input_names=template.input_names)


# --- loading models with symbolic inputs ----------------------------------------------------


def reference_shape(dims: Dims, default: Sequence[int] | None = None,
                    reference: Mapping[str, int] | None = None) -> Shape:
    """The concrete shape a model is imported at to propagate `dims` from.

    Each symbol takes `reference`'s value if given, else 2 for the batch axis (axis 0), the
    model's own channels for axis 1 of an image (so that RDP names the op whose weights fix
    them) and, for any other axis, the smallest multiple of 32 above the model's default size there
    (224 for an image axis, 128 otherwise, when there is no default): a size at which no
    adaptive pool of a classifier is an identity (VGG's 7x7 pool at 224 is) and strides of
    up to 32 divide.
    """
    chosen: dict[str, int] = dict(reference or {})
    shape = []
    for axis, d in enumerate(dims):
        if isinstance(d, int):
            shape.append(d)
            continue
        if d not in chosen:
            if axis == 0:
                chosen[d] = 2
            elif axis == 1 and len(dims) == 4 and default is not None:
                chosen[d] = default[1]  # channels: the model's own, so RDP names the op
            else:
                base = default[axis] if default is not None and axis < len(default) else (
                    224 if len(dims) == 4 else 128)
                chosen[d] = (base // _ALIGN + 1) * _ALIGN
        shape.append(chosen[d])
    return tuple(shape)


def load_symbolic(spec: str, input_shape: str | Sequence[int | str] | None = None, *,
                  allow_opaque: bool = False,
                  reference: Mapping[str, int] | None = None) -> SymbolicGraph:
    """Import a model with symbolic input dimensions and propagate them.

    Args:
        spec: A zoo name, ``module:callable``, an ``.onnx`` file or a graph ``.json``.
        input_shape: The input shape with symbol names where it varies (``1,3,H,W``). For an
            ONNX model it may be left out: the input's named dynamic dimensions (``dim_param``)
            become the symbols. Integers fix a dimension; names rename or declare symbols.
        allow_opaque: Import unsupported ops as opaque ops (an opaque op on a symbolic tensor
            is still refused by the propagation).
        reference: Values to import the model at, by symbol (default: `reference_shape`).

    Raises:
        InputError subclasses: an unknown model, a model without symbolic dimensions, one
        that does not run at the reference shape, or a shape that cannot follow the symbols.
    """
    from simulator.workload.loader import (
        DEFAULT_INPUT_SHAPE,
        _split_resolution,
        load,
        resolve_zoo_name,
    )

    base, resolution = _split_resolution(spec)
    path = Path(spec)
    onnx_file = resolve_zoo_name(base) is None and path.suffix.lower() == ".onnx"
    if input_shape is None and onnx_file:
        dims = _onnx_dims(path)
    elif input_shape is None:
        raise SymbolicShapeError(f"model {spec!r} has no symbolic dimensions; name them in the "
                                 "input shape, e.g. --input-shape 1,3,H,W")
    else:
        dims = parse_symbolic_shape(input_shape)
    if not any(isinstance(d, str) for d in dims):
        raise SymbolicShapeError(f"input shape {shape_text(dims)} of {spec!r} names no "
                                 "symbol (e.g. 1,3,H,W)")
    if resolution is not None:
        raise SymbolicShapeError(f"model {spec!r} fixes its resolution; give the zoo name "
                                 "alone and bind H and W")
    if path.suffix.lower() == ".json" and resolve_zoo_name(base) is None:
        return propagate(load(spec), dims)
    key = resolve_zoo_name(base)
    if key is not None:
        from simulator.workload.zoo_catalog import catalog

        default: Sequence[int] | None = catalog()[key].input_shape
    else:
        default = DEFAULT_INPUT_SHAPE if not onnx_file else None
    shape = reference_shape(dims, default, reference)
    try:
        graph = load(spec, shape, allow_opaque=allow_opaque)
    except InputShapeError as err:
        raise SymbolicShapeError(f"importing {spec!r} at the reference shape "
                                 f"{shape_text(shape)} for the symbols of "
                                 f"{shape_text(dims)} failed: {err}") from None
    return propagate(graph, dims)


def _onnx_dims(path: Path) -> Dims:
    """The declared shape of an ONNX model's first input, dynamic dimensions by name."""
    import onnx

    from simulator.workload.errors import ModelFileError

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # noqa: BLE001 - any unreadable file: the importer's message
        raise ModelFileError(f"ONNX model {path} cannot be read: {err}") from None
    weights = {t.name for t in model.graph.initializer}
    real = [v for v in model.graph.input if v.name not in weights]
    if not real or not real[0].type.tensor_type.HasField("shape"):
        raise SymbolicShapeError(f"the first input of {path} declares no shape; give it with "
                                 "--input-shape (e.g. 1,3,H,W)")
    dims: list[int | str] = []
    for axis, d in enumerate(real[0].type.tensor_type.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        elif d.dim_param and _NAME.match(d.dim_param):
            dims.append(d.dim_param)
        else:
            raise SymbolicShapeError(f"input {real[0].name!r} of {path} has an unnamed dynamic "
                                     f"dimension {axis}; name it with --input-shape "
                                     "(e.g. 1,3,H,W)")
    return tuple(dims)


def load_bound(spec: str, input_shape: str | None = None, bindings: str | None = None, *,
               allow_opaque: bool = False) -> ComputeGraph:
    """The command line's model loading: ``--input-shape`` with symbols and ``--bind``.

    Without `bindings` and symbols this is `simulator.workload.loader.load`. With symbols in
    `input_shape` (or an ONNX input with named dynamic dimensions), `bindings` gives their
    values (``H=512,W=512``) and the model is imported once at its reference shape,
    propagated and bound.

    Raises:
        InputError subclasses: those of `load` and `load_symbolic`, a symbolic shape without
        `bindings`, and bad bindings (`BindingError`).
    """
    from simulator.workload.loader import load

    symbolic = has_symbols(input_shape)
    if bindings is None:
        if symbolic:
            names = [d for d in parse_symbolic_shape(input_shape) if isinstance(d, str)]
            raise BindingError(f"--input-shape {input_shape} names symbols "
                               f"{', '.join(dict.fromkeys(names))}; give their values with "
                               f"--bind, e.g. --bind "
                               + ",".join(f"{n}=224" for n in dict.fromkeys(names)))
        return load(spec, input_shape, allow_opaque=allow_opaque)
    values = parse_bindings(bindings)
    return load_symbolic(spec, input_shape, allow_opaque=allow_opaque).bind(values)

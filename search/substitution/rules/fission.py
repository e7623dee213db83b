"""Operator fission: an op that fits no group split into pieces that each fit.

Operator fission (Venkatram and Oliaro, `operator-fission.txt` §2.1) decomposes a tensor
operator into primitives: a *linear transformation* primitive (conv, GEMM) stays linear in
each of its inputs, so it can be cut along an axis into smaller linear primitives joined by
*layout* primitives (Slice, Concat) or an elementwise Add. The rules here apply that to the
ops that fit no fusion group on the machine (`CostCache`: the single-op group does not fit,
mostly because its weights exceed the buffer), which otherwise run layer by layer outside the
fusion; it is also how `DESIGN.md` describes BRR's weight sub-groups (output-channel slices,
or input-channel slices with partial sums), made explicit in the graph:

``fission-out-channels``
    conv / dwconv / linear -> P ops on output-channel slices + one CONCAT on the channel axis.
    Each piece reads the whole input, except for grouped and depthwise convolutions, whose
    pieces are whole groups and read their channel SLICE of the input.
``fission-in-channels``
    conv (groups 1) / linear -> channel SLICEs of the input, P ops on them producing partial
    sums of the whole output, and a chain of P - 1 adds; the bias goes to the first piece only
    and an ``epilogue`` moves to the last add (partial sums are not activated).
``fission-rows``
    conv / dwconv / pool -> P row bands: row SLICEs of the input with the halo the window
    needs, one op per band (top / bottom padding only where the band's window reaches the
    padding), a CONCAT on the height axis. The weights are repeated in every band. A band
    seldom needs less buffer than the whole op (LBDF holds a window of rows whatever the
    height, BRR already runs row tiles): it does where the padding clips a band's window
    (large windows on small maps), so this rule is rarely proposed.

The op that produces the original tensor (the CONCAT, or the last add) keeps the original
op's name, so its consumers and the network outputs are unchanged; new ops are named
``NAME/oc{k}``, ``NAME/ic{k}``, ``NAME/rows{k}`` (their slices ``.slice``, the adds
``.add``). `Match.args` records the number of pieces (``pieces``).

`find` proposes, for each op that fits no group under the context's hardware and dataflow,
the smallest P for which every op of the rewrite (pieces, slices, the concat or adds) fits
alone. A single-op group's cost depends only on that op and the shapes of its inputs and
output, so candidate pieces are costed as one-op graphs (memoised per signature): the result
is what `CostCache(rewritten_graph, hw, scheme).group((piece,))` gives, without rebuilding a
graph per candidate P. The requirement of a piece does not grow as P grows (its slice of
channels or rows only shrinks), so P is found by bisection on the piece size, from the most
units the weights allow (LBDF; BRR streams weights, so from half the units) down to one
unit per piece (`_smallest_pieces`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from search.substitution.base import Match, RewriteError, RuleContext
from search.substitution.rules._build import (
    EPILOGUE,
    epilogue,
    input_names,
    ops_of,
    rebuild,
    unique_name,
    updated_params,
    with_attrs,
)
from simulator.cost.evaluate import COST_MODELS
from simulator.scheme import Scheme
from simulator.workload.builder import OpSpec
from simulator.workload.graph import (
    ComputeGraph,
    Op,
    OpKind,
    Shape,
    default_mapping,
    freeze_attrs,
)
from simulator.workload.ops import conv_kind, conv_macs, linear_macs

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig
    from simulator.workload.execute import Params

__all__ = ["FISSION_RULES", "IN_CHANNELS", "OUT_CHANNELS", "ROWS", "FissionRule",
           "InChannelFission", "OutChannelFission", "RowFission"]

CITATION = ("Venkatram & Oliaro, ML Computation Graph Operator Fission and Fusion "
            "(operator-fission.txt) §2.1: linear-transformation primitives split into smaller "
            "ones joined by Slice/Concat layout primitives; DESIGN.md (BRR): output-channel "
            "slices, input-channel slices with partial sums")

_CONVS = (OpKind.CONV, OpKind.DWCONV)


@dataclass(frozen=True)
class _ParamSlice:
    """How one piece's parameters come from the original op's.

    Attributes:
        piece: The piece's name.
        dim: The weight dimension sliced (None: the whole weight, repeated).
        start, end: The slice of `dim`.
        bias: ``slice`` (bias[start:end]), ``all`` (the whole bias) or ``none``.
    """

    piece: str
    dim: int | None
    start: int = 0
    end: int = 0
    bias: str = "all"


@dataclass(frozen=True)
class _Plan:
    """One fission: the specs replacing the op, in order, the pieces' parameters, and how
    many of the specs (the last ones) join the pieces back (the concat, or the adds)."""

    specs: tuple[OpSpec, ...]
    params: tuple[_ParamSlice, ...] = field(default=())
    joiners: int = 1


def _ranges(n: int, pieces: int) -> list[tuple[int, int]]:
    """`pieces` consecutive ranges covering 0..n, sizes differing by at most one (larger
    first)."""
    q, r = divmod(n, pieces)
    bounds = [0]
    for k in range(pieces):
        bounds.append(bounds[-1] + q + (k < r))
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _weight_shape(op: Op) -> tuple[int, ...]:
    """Shape of the weight tensor of a conv or linear op (the executor's format)."""
    if op.kind is OpKind.LINEAR:
        return (op.output_shape[-1], op.input_shapes[0][-1])
    return (op.output_shape[1], op.input_shapes[0][1] // op.groups, *op.kernel)


def _has_bias(op: Op) -> bool | None:
    """Whether a conv / linear op has a bias; None if its weight count fits neither form."""
    shape = _weight_shape(op)
    numel = math.prod(shape)
    if op.weight_elems == numel:
        return False
    if op.weight_elems == numel + shape[0]:
        return True
    return None


def _spec(name: str, kind: OpKind, op_type: str, inputs: Sequence[str],
          output_shape: Sequence[int], attrs: Any = (), **fields: Any) -> OpSpec:
    """A new op as a spec (`OpSpec` built directly: plans of thousands of pieces are built
    while choosing P)."""
    return OpSpec(name=name, kind=kind, op_type=op_type, inputs=tuple(inputs),
                  output_shape=tuple(output_shape),
                  attrs=attrs if isinstance(attrs, tuple) else freeze_attrs(attrs), **fields)


def _slice_spec(name: str, src: str, src_shape: Shape, axis: int, start: int,
                end: int) -> OpSpec:
    shape = list(src_shape)
    shape[axis] = end - start
    return _spec(name, OpKind.SLICE, "slice", [src], shape,
                 attrs={"axis": axis, "start": start, "end": end, "step": 1})


def _concat_spec(name: str, srcs: Sequence[str], shape: Shape, axis: int) -> OpSpec:
    return _spec(name, OpKind.CONCAT, "concat", srcs, shape, attrs={"axis": axis})


Fresh = Callable[[str], str]
"""Makes a new unique op name from a base name."""


class FissionRule:
    """What the three fission rules share: matching, finding P, applying and transforming.

    Subclasses define `name`, `_units` (the most pieces the op can be cut into; 0 when the
    rule does not apply to it) and `_plan` (the specs of a fission into P pieces).
    """

    name: str = ""
    stage: str = "fission"
    citation: str = CITATION

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    # --- what subclasses define ----------------------------------------------------------

    def _units(self, op: Op) -> int:
        raise NotImplementedError

    def _plan(self, op: Op, src: tuple[str, ...], pieces: int, fresh: Fresh) -> _Plan:
        raise NotImplementedError

    def _unit_weights(self, op: Op) -> tuple[int, int] | None:
        """(weight elements per unit, elements every piece or one piece holds besides), a
        bound for P; None when pieces repeat the weights."""
        return None

    # --- the Rule protocol ---------------------------------------------------------------

    def find(self, graph: ComputeGraph, ctx: RuleContext) -> list[Match]:
        """A match, with the fewest pieces that all fit, for every op this rule can split
        that fits no group under `ctx` (none without hardware or on a dataflow that does
        not fuse)."""
        if ctx.hw is None:
            return []
        scheme = ctx.scheme if ctx.scheme is not None else \
            (ctx.cache.scheme if ctx.cache is not None else None)
        if scheme is None:
            return []
        scheme = Scheme.parse(scheme)
        if not scheme.searchable:
            return []
        cache = ctx.cache
        if cache is not None and not (cache.graph is graph and cache.hw == ctx.hw
                                      and cache.scheme == scheme):
            cache = None  # the cache of another graph (apply_all passes one context on)
        found = []
        for op in graph:
            if self._units(op) < 2:
                continue
            if cache is not None:
                fits = cache.group((op.id,)).fits
            else:
                fits = _fits_alone(_signature(op, op.inputs, op.input_shapes, cost_only=True),
                                   ctx.hw, scheme)
            if fits:
                continue
            pieces = _smallest_pieces(self, _signature(op, op.inputs, op.input_shapes),
                                      ctx.hw, scheme)
            if pieces is not None:
                found.append(Match(self.name, (op.name,), (("pieces", pieces),)))
        return found

    def apply(self, graph: ComputeGraph, match: Match) -> ComputeGraph:
        """`graph` with the matched op split into ``pieces`` pieces."""
        op, plan = self._resolve(graph, match)
        return rebuild(graph, {op.name: plan.specs}, rule=self.name)

    def transform(self, graph: ComputeGraph, match: Match, params: Params) -> Params:
        """The parameters of `apply(graph, match)`: weight (and bias) slices for the pieces,
        nothing for the op's name (now a concat or an add); other ops passed through."""
        op, plan = self._resolve(graph, match)
        if not plan.params:  # pooling: no parameters
            return updated_params(params)
        own = params.get(op.name)
        weight = None if own is None else own.get("weight")
        if weight is None or tuple(weight.shape) != _weight_shape(op):
            raise RewriteError(f"rewrite {match}: op {op.name!r} needs a weight of shape "
                               f"{_weight_shape(op)} in its parameters")
        bias = own.get("bias")
        if (bias is not None) != bool(_has_bias(op)):
            raise RewriteError(f"rewrite {match}: op {op.name!r} "
                               f"{'has' if _has_bias(op) else 'has no'} bias, its parameters "
                               f"{'lack' if bias is None else 'have'} one")
        put: dict[str, dict[str, Any]] = {}
        for s in plan.params:
            w = weight if s.dim is None else weight.narrow(s.dim, s.start, s.end - s.start)
            tensors = {"weight": w.contiguous()}
            if bias is not None and s.bias == "slice":
                tensors["bias"] = bias[s.start:s.end].contiguous()
            elif bias is not None and s.bias == "all":
                tensors["bias"] = bias
            put[s.piece] = tensors
        return updated_params(params, drop=[op.name], put=put)

    # --- shared ----------------------------------------------------------------------------

    def _resolve(self, graph: ComputeGraph, match: Match) -> tuple[Op, _Plan]:
        """The matched op and its fission plan in `graph`; `RewriteError` unless it holds."""
        if match.rule != self.name:
            raise RewriteError(f"rewrite {match} is not one of rule {self.name!r}")
        (op,) = ops_of(graph, match, 1)
        pieces = match.arg("pieces")
        if isinstance(pieces, bool) or not isinstance(pieces, int):
            raise RewriteError(f"rewrite {match}: 'pieces' must be an integer, got "
                               f"{pieces!r}")
        units = self._units(op)
        if units < 2:
            raise RewriteError(f"rewrite {match} does not apply to graph {graph.name!r}: "
                               f"op {op.name!r} ({op.kind.value}) cannot be split by "
                               f"{self.name}")
        if not 2 <= pieces <= units:
            raise RewriteError(f"rewrite {match}: op {op.name!r} splits into 2..{units} "
                               f"pieces, not {pieces}")
        taken: set[str] = set()

        def fresh(base: str) -> str:
            name = unique_name(graph, base, taken)
            taken.add(name)
            return name

        return op, self._plan(op, input_names(graph, op), pieces, fresh)


class OutChannelFission(FissionRule):
    """conv / dwconv / linear -> pieces on output-channel slices + a channel concat."""

    name = "fission-out-channels"

    def _unit_weights(self, op: Op) -> tuple[int, int] | None:
        bias = int(bool(_has_bias(op)))
        if op.kind is OpKind.LINEAR:
            return op.input_shapes[0][-1] + bias, 0
        c_in, window = op.input_shapes[0][1] // op.groups, math.prod(op.kernel)
        per_channel = c_in * window + bias  # a unit: one output channel, or one group's
        return per_channel * (1 if op.groups == 1 else op.output_shape[1] // op.groups), 0

    def _units(self, op: Op) -> int:
        if op.kind is OpKind.LINEAR and len(op.inputs) == 1 and _has_bias(op) is not None:
            return op.output_shape[-1]
        if op.kind in _CONVS and _conv_ok(op):
            return op.output_shape[1] if op.groups == 1 else op.groups
        return 0

    def _plan(self, op: Op, src: tuple[str, ...], pieces: int, fresh: Fresh) -> _Plan:
        bias = int(bool(_has_bias(op)))
        specs: list[OpSpec] = []
        params: list[_ParamSlice] = []
        names: list[str] = []
        if op.kind is OpKind.LINEAR:
            f_in = op.input_shapes[0][-1]
            for k, (a, b) in enumerate(_ranges(op.output_shape[-1], pieces)):
                shape = (*op.output_shape[:-1], b - a)
                name = fresh(f"{op.name}/oc{k}")
                specs.append(_spec(name, OpKind.LINEAR, op.op_type, src, shape,
                                   weight_elems=(b - a) * (f_in + bias),
                                   macs=linear_macs(shape, f_in), attrs=op.attrs))
                params.append(_ParamSlice(name, 0, a, b, "slice"))
                names.append(name)
            axis = len(op.output_shape) - 1
        else:
            c_in, c_out, g = op.input_shapes[0][1], op.output_shape[1], op.groups
            cin_g, cout_g, window = c_in // g, c_out // g, math.prod(op.kernel)
            for k, (a, b) in enumerate(_ranges(c_out if g == 1 else g, pieces)):
                name = fresh(f"{op.name}/oc{k}")
                if g == 1:
                    inputs, groups, pc_in, oa, ob = src, 1, c_in, a, b
                else:  # whole groups [a, b): their input channels, their output channels
                    groups, pc_in, oa, ob = b - a, (b - a) * cin_g, a * cout_g, b * cout_g
                    cut = fresh(f"{name}.slice")
                    specs.append(_slice_spec(cut, src[0], op.input_shapes[0], 1, a * cin_g,
                                             b * cin_g))
                    inputs = (cut,)
                shape = (op.output_shape[0], ob - oa, *op.output_shape[2:])
                specs.append(_spec(
                    name, conv_kind(groups, pc_in), op.op_type, inputs, shape,
                    kernel=op.kernel, stride=op.stride, padding=op.padding,
                    dilation=op.dilation, groups=groups,
                    weight_elems=(ob - oa) * (cin_g * window + bias),
                    macs=conv_macs(shape, pc_in, groups, op.kernel), attrs=op.attrs))
                params.append(_ParamSlice(name, 0, oa, ob, "slice"))
                names.append(name)
            axis = 1
        specs.append(_concat_spec(op.name, names, op.output_shape, axis))
        return _Plan(tuple(specs), tuple(params))


class InChannelFission(FissionRule):
    """conv (groups 1) / linear -> input-channel slices, partial sums and an add chain."""

    name = "fission-in-channels"

    def _unit_weights(self, op: Op) -> tuple[int, int] | None:
        bias = int(bool(_has_bias(op)))
        if op.kind is OpKind.LINEAR:
            return op.output_shape[-1], op.output_shape[-1] * bias
        return op.output_shape[1] * math.prod(op.kernel), op.output_shape[1] * bias

    def _units(self, op: Op) -> int:
        if op.kind is OpKind.LINEAR and len(op.inputs) == 1 and _has_bias(op) is not None:
            return op.input_shapes[0][-1]
        if op.kind is OpKind.CONV and op.groups == 1 and _conv_ok(op):
            return op.input_shapes[0][1]
        return 0

    def _plan(self, op: Op, src: tuple[str, ...], pieces: int, fresh: Fresh) -> _Plan:
        bias = bool(_has_bias(op))
        linear = op.kind is OpKind.LINEAR
        in_shape = op.input_shapes[0]
        axis = len(in_shape) - 1 if linear else 1
        attrs = with_attrs(op.attrs, **{EPILOGUE: None})
        specs: list[OpSpec] = []
        params: list[_ParamSlice] = []
        ranges = _ranges(in_shape[axis], pieces)
        for k, (a, b) in enumerate(ranges):
            name = fresh(f"{op.name}/ic{k}")
            cut = fresh(f"{name}.slice")
            specs.append(_slice_spec(cut, src[0], in_shape, axis, a, b))
            own_bias = op.output_shape[-1 if linear else 1] if bias and k == 0 else 0
            if linear:
                weights = op.output_shape[-1] * (b - a) + own_bias
                specs.append(_spec(name, OpKind.LINEAR, op.op_type, [cut], op.output_shape,
                                   weight_elems=weights,
                                   macs=linear_macs(op.output_shape, b - a), attrs=attrs))
            else:
                weights = op.output_shape[1] * (b - a) * math.prod(op.kernel) + own_bias
                specs.append(_spec(
                    name, OpKind.CONV, op.op_type, [cut], op.output_shape, kernel=op.kernel,
                    stride=op.stride, padding=op.padding, dilation=op.dilation, groups=1,
                    weight_elems=weights, macs=conv_macs(op.output_shape, b - a, 1, op.kernel),
                    attrs=attrs))
            params.append(_ParamSlice(name, 1, a, b, "all" if k == 0 else "none"))
        adds: list[OpSpec] = []
        acc = params[0].piece
        for k in range(1, pieces):
            last = k == pieces - 1
            total = op.name if last else fresh(f"{op.name}/ic{k}.add")
            adds.append(_spec(total, OpKind.ELTWISE_BINARY, "add", [acc, params[k].piece],
                              op.output_shape,
                              attrs={EPILOGUE: epilogue(op)} if last and epilogue(op) else {}))
            acc = total
        return _Plan((*specs, *adds), tuple(params), joiners=len(adds))


class RowFission(FissionRule):
    """conv / dwconv / pool -> row bands with their halos + a height concat."""

    name = "fission-rows"

    def _units(self, op: Op) -> int:
        if op.kind not in (*_CONVS, OpKind.POOL) or len(op.inputs) != 1 \
                or len(op.output_shape) != 4 or len(op.input_shapes[0]) != 4 \
                or op.attr("adaptive", False):
            return 0
        if op.kind in _CONVS and not _conv_ok(op):
            return 0
        top, _, bottom, _ = op.padding
        if (top or bottom) and str(op.attr("padding_mode", "zeros")) != "zeros":
            return 0  # reflected / circular padding of a band is not the tensor's
        for axis, before, after in ((0, top, bottom), (1, op.padding[1], op.padding[3])):
            size, reach = op.input_shapes[0][2 + axis], \
                op.dilation[axis] * (op.kernel[axis] - 1)
            if (size + before + after - reach - 1) // op.stride[axis] + 1 \
                    != op.output_shape[2 + axis]:
                return 0  # ceil_mode added a partial window: bands would not reproduce it
        return op.output_shape[2]

    def _plan(self, op: Op, src: tuple[str, ...], pieces: int, fresh: Fresh) -> _Plan:
        in_shape = op.input_shapes[0]
        h_in, h_out = in_shape[2], op.output_shape[2]
        top, left, bottom, right = op.padding
        stride, reach = op.stride[0], op.dilation[0] * (op.kernel[0] - 1)
        specs: list[OpSpec] = []
        params: list[_ParamSlice] = []
        names: list[str] = []
        for k, (a, b) in enumerate(_ranges(h_out, pieces)):
            lo, hi = a * stride - top, (b - 1) * stride - top + reach
            r0, r1 = max(lo, 0), min(hi, h_in - 1) + 1
            if r1 <= r0:
                raise RewriteError(f"op {op.name!r}: row band {k} of {pieces} reads only "
                                   "padding")
            name = fresh(f"{op.name}/rows{k}")
            inputs = src
            if (r0, r1) != (0, h_in):
                cut = fresh(f"{name}.slice")
                specs.append(_slice_spec(cut, src[0], in_shape, 2, r0, r1))
                inputs = (cut,)
            shape = (*op.output_shape[:2], b - a, op.output_shape[3])
            macs = conv_macs(shape, in_shape[1], op.groups, op.kernel) if op.kind in _CONVS \
                else op.macs * (b - a) // h_out
            specs.append(_spec(
                name, op.kind, op.op_type, inputs, shape, kernel=op.kernel, stride=op.stride,
                padding=(max(0, -lo), left, max(0, hi - (h_in - 1)), right),
                dilation=op.dilation, groups=op.groups, weight_elems=op.weight_elems,
                macs=macs, attrs=op.attrs))
            names.append(name)
            if op.kind in _CONVS:
                params.append(_ParamSlice(name, None))
        specs.append(_concat_spec(op.name, names, op.output_shape, 2))
        return _Plan(tuple(specs), tuple(params))


def _conv_ok(op: Op) -> bool:
    """A conv the rules can split: one 4-D input, whole groups, a known weight layout."""
    return (len(op.inputs) == 1 and len(op.input_shapes[0]) == 4
            and len(op.output_shape) == 4 and op.input_shapes[0][1] % op.groups == 0
            and op.output_shape[1] % op.groups == 0 and _has_bias(op) is not None)


# --- choosing P ------------------------------------------------------------------------------

_Signature = tuple
"""What a single-op group's cost reads of an op: kind, fields, input slots and shapes."""


def _signature(x: Op | OpSpec, inputs: Sequence[Any], input_shapes: Sequence[Shape],
               cost_only: bool = False) -> _Signature:
    """The op's kind, fields, input slots and shapes; with `cost_only`, only what the cost
    of a single-op group reads (not the MACs, of the attributes only ``adaptive``), so that
    pieces differing in a slice's bounds share one costing."""
    refs = list(dict.fromkeys(inputs))
    attrs = x.attrs
    if cost_only:
        attrs = (("adaptive", True),) if dict(x.attrs).get("adaptive") else ()
    return (x.kind, x.op_type, tuple(refs.index(r) for r in inputs), tuple(input_shapes),
            x.output_shape, x.kernel, x.stride, x.padding, x.dilation, x.groups,
            x.weight_elems, 0 if cost_only else x.macs, attrs)


def _alone(sig: _Signature) -> Op:
    """The op of a signature, alone: id 0, its distinct inputs numbered as network inputs."""
    kind, op_type, slots, input_shapes, out, kernel, stride, padding, dilation, groups, \
        weights, macs, attrs = sig
    return Op(id=0, name="op", kind=kind, op_type=op_type,
              inputs=tuple(-(k + 1) for k in slots), input_shapes=input_shapes,
              output_shape=out, kernel=kernel, stride=stride, padding=padding,
              dilation=dilation, groups=groups, weight_elems=weights, macs=macs, attrs=attrs,
              mapping=default_mapping(kind, input_shapes, out))


@lru_cache(maxsize=16384)
def _fits_alone(sig: _Signature, hw: HardwareConfig, scheme: Scheme) -> bool:
    """Whether the op of `sig` (a ``cost_only`` signature) fits the buffer as a group of its
    own. A single-op group's cost reads only the op, its input shapes and its output (always
    written), so a one-op graph gives what the op's group gives in any graph."""
    op = _alone(sig)
    shapes: dict[int, Shape] = {}
    for ref, shape in zip(op.inputs, op.input_shapes, strict=True):
        shapes[-ref - 1] = shape
    graph = ComputeGraph(name="fission-probe", ops=(op,),
                         input_shapes=tuple(shapes[k] for k in range(len(shapes))),
                         outputs=(0,))
    return COST_MODELS[scheme](graph, (0,), hw).fits


def _all_fit(rule: FissionRule, op: Op, pieces: int, hw: HardwareConfig, scheme: Scheme,
             joiners: bool = True) -> bool:
    """Whether every op of `rule`'s fission of `op` (alone) into `pieces` fits alone (the
    concat or adds joining the pieces back only if `joiners`)."""
    src = tuple(f"in{k}" for k in range(len(op.inputs)))
    try:
        plan = rule._plan(op, src, pieces, lambda base: base)
    except RewriteError:
        return False
    shapes = dict(zip(src, op.input_shapes, strict=True))
    for spec in plan.specs:
        shapes[spec.name] = spec.output_shape
    specs = plan.specs if joiners else plan.specs[:len(plan.specs) - plan.joiners]
    distinct = {_signature(s, s.inputs, [shapes[n] for n in s.inputs], cost_only=True)
                for s in specs}
    return all(_fits_alone(sig, hw, scheme) for sig in distinct)


@lru_cache(maxsize=4096)
def _smallest_pieces(rule: FissionRule, sig: _Signature, hw: HardwareConfig,
                     scheme: Scheme) -> int | None:
    """The fewest pieces into which `rule` splits the op of `sig` with every op of the
    rewrite fitting alone; None if there are none.

    P pieces of U units (channels, groups, rows) are at most s = ceil(U / P) units each, and
    the fewest pieces of at most s units are ceil(U / s). A piece's requirement does not
    shrink as it grows, so the answer is ceil(U / s) for the largest s whose pieces (and
    slices) fit, found by bisection on s between 1 and, under LBDF (whose weights stay
    resident), the most units the weights allow (s * weights per unit + the rest <= the
    buffer, or the weight buffer when split;
    BRR streams weights in slices, so a piece's weights may exceed the buffer); the concat or
    adds joining the pieces do not shrink with more pieces, so they are checked once, at the
    answer."""
    op = _alone(sig)
    units = rule._units(op)
    most = units // 2  # P >= 2
    per_unit = rule._unit_weights(op)
    if per_unit is not None and scheme.holds_weights:
        unit, fixed = per_unit
        most = min(most, (hw.weight_capacity // hw.dtype_bytes - fixed) // max(unit, 1))
    if most < 1:
        return None

    def fits(size: int) -> bool:
        return _all_fit(rule, op, -(-units // size), hw, scheme, joiners=False)

    if fits(most):
        size = most
    elif not fits(1):
        return None
    else:
        size, bad = 1, most
        while bad - size > 1:
            mid = (size + bad) // 2
            size, bad = (mid, bad) if fits(mid) else (size, mid)
    pieces = -(-units // size)
    return pieces if _all_fit(rule, op, pieces, hw, scheme) else None


OUT_CHANNELS = OutChannelFission()
IN_CHANNELS = InChannelFission()
ROWS = RowFission()
FISSION_RULES: tuple[FissionRule, ...] = (OUT_CHANNELS, IN_CHANNELS, ROWS)
"""The fission rules, in the order the ``fission`` stage tries them."""

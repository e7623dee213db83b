"""Layer-by-layer (LBL) execution: one op on its own, streamed or tiled to the buffer.

An op runs on its own (every op of a layer-by-layer plan; an unfusable op of a fused plan,
`simulator.cost.CostCache.run`) in one of two ways (docs/cost-model.md, section 4.3):

* **streamed**: when the op fits the buffer as a single-op LBDF group
  (`simulator.cost.lbdf.group_cost(graph, (o,), hw).fits`), it streams its rows with its
  weights resident, at the ideal traffic: every input, its weights and its output cross DRAM
  once. `buffer_bytes` is that LBDF figure.
* **tiled**: otherwise a loop nest over the op's output row bands (with input halos), output
  channel blocks and input channel blocks is tiled to the buffer, and the tiling with the least
  DRAM traffic that fits is taken (`layer_tiling`). A matrix-like op (a convolution with one
  group, a linear layer) has three loop orders: *weights outer* (each weight block read once,
  the input re-read once per output-channel block), *rows outer* (each input band read once,
  the weights re-read once per row band) and *blocks* (input and weight blocks both streamed:
  the input re-read per output-channel block, the weights per row band). Partial sums carried
  across input-channel blocks are held on chip at `ACC_BYTES` per element. A channel-separable
  op (depthwise or grouped convolution, pooling, elementwise, resize, concatenation along
  channels, global pooling) tiles by channel blocks and row bands and re-reads nothing but its
  halo rows; a layout op (flatten, transpose, a slice or pad across channels) is copied in
  chunks; a softmax or normalisation over trailing axes (attention's softmax, LayerNorm on
  tokens, GroupNorm) in chunks of whole lines; a product of two activations (attention) head
  by head, the second operand's head resident and the first's rows streamed; other
  normalisations (their statistics span the rows), other products of two activations and
  opaque ops cannot be tiled and run whole.

If even the smallest tile does not fit (one output row of one output channel and one input
channel), the op cannot run: its cost has `fits = False`, `Failure.TILE_OVER_BUFFER` and a
reason naming the op and what that tile needs. The candidate tilings are, per dimension, the
smallest block for every possible block count (``ceil(n / k)`` for k = 1..n: every exact
divisor among them): the search is exact over equal-sized blocks and vectorised over the
(band, block) grid. A group of more than one op is not a layer-by-layer group (`fits` False,
`Failure.NOT_SINGLE_OP`; its figures are the ideal ones).

The simulator runs a tiled layer tile by tile (`simulator.engine.layer`), moving exactly the
DRAM bytes counted here and peaking at exactly `buffer_bytes`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.cost import lbdf
from simulator.cost.cycles import layer_cycles
from simulator.cost.rows import is_embedding, reduced_axes, row_deps
from simulator.cost.traffic import boundary, buffer_traffic_elems, weight_traffic_bytes
from simulator.cost.types import Failure, GroupCost, timing
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph, Op, OpKind

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["ACC_BYTES", "Band", "Layer", "LayerTiling", "LoopOrder", "group_cost",
           "layer_tiling"]

ACC_BYTES = 4
"""Bytes of an on-chip partial sum carried across tiles (32-bit accumulators, int8 or fp16
data alike; `dtype_bytes` when that is larger): the partial sums of a matrix op split over
input-channel blocks and the running sums of a tiled global pooling."""


class LoopOrder(StrEnum):
    """How a layer runs on its own (docs/cost-model.md, section 4.3)."""

    STREAM = "stream"
    """Rows streamed as a single-op LBDF group: the ideal traffic."""
    WEIGHTS_OUTER = "weights_outer"
    """Matrix op: output-channel blocks outer, their weights resident (read once); the input
    streamed per row band and input-channel block, re-read once per output-channel block."""
    ROWS_OUTER = "rows_outer"
    """Matrix op: row bands outer, the band's input (all channels) resident (read once); the
    weights streamed per output- and input-channel block, re-read once per row band."""
    BLOCKS = "blocks"
    """Matrix op: input and weight blocks both streamed: the input re-read once per
    output-channel block, the weights once per row band."""
    CHANNELS = "channels"
    """Channel-separable op: channel blocks outer (their weights resident), row bands inner:
    only halo rows are re-read."""
    CHUNKS = "chunks"
    """Layout op: copied in chunks of its elements; a softmax or normalisation over its
    trailing axes: computed in chunks of whole lines (the elements one statistic spans);
    nothing is re-read."""
    HEADS = "heads"
    """Product of two activations (attention's Q K^T and P V): per head (the leading axes),
    the second operand's slice resident (read once), the first operand's rows streamed in
    chunks and the output rows written: every tensor crosses DRAM once."""
    WHOLE = "whole"
    """An op that cannot be tiled (softmax, opaque): all of it at once."""


@dataclass(frozen=True, slots=True)
class Band:
    """One row band of a layer: output rows `r0..r1` and, per banded input, its rows."""

    r0: int
    r1: int
    lo: tuple[int, ...]
    hi: tuple[int, ...]

    @property
    def out_rows(self) -> int:
        """Output rows of the band."""
        return self.r1 - self.r0 + 1

    def in_rows(self, k: int) -> int:
        """Rows of banded input `k` the band reads (its own rows and the halo)."""
        return self.hi[k] - self.lo[k] + 1


@dataclass(frozen=True)
class LayerTiling:
    """How one op runs on its own, and what it costs.

    Attributes:
        op: The op id.
        order: The loop order (`LoopOrder.STREAM` when it streams its rows).
        band_rows: Output rows per band (global pooling: input rows per band); 0 when the op
            is not tiled by rows.
        bands: Row bands (chunks for `LoopOrder.CHUNKS`).
        out_block: Output channels per block (channel-separable ops: channel groups per
            block); 0 when not tiled by channels.
        out_blocks: Output-channel blocks.
        in_block: Input channels per block of a matrix op; 0 otherwise.
        in_blocks: Input-channel blocks.
        buffer_bytes: Peak buffer the tiling holds (the simulator's peak).
        weight_buffer_bytes: Part of it holding weights.
        act_read, weight_read, write: DRAM bytes.
        reread_act, reread_weight: The part of `act_read` / `weight_read` above the ideal
            (every input and the weights read once): halos and re-reads.
        fits: The tiling fits the buffer (False: not even the smallest tile does).
        reason: Why not ("" when it fits).
        cycles: The time of the schedule (`simulator.cost.cycles`: streamed, the LBDF row
            schedule; tiled, synchronous tiles); 0 when it does not fit.
    """

    op: int
    order: LoopOrder
    band_rows: int
    bands: int
    out_block: int
    out_blocks: int
    in_block: int
    in_blocks: int
    buffer_bytes: int
    weight_buffer_bytes: int
    act_read: int
    weight_read: int
    write: int
    reread_act: int
    reread_weight: int
    fits: bool
    reason: str
    cycles: int = 0

    @property
    def streamed(self) -> bool:
        """The op streams its rows as a single-op LBDF group (not tiled)."""
        return self.order is LoopOrder.STREAM

    @property
    def tiles(self) -> int:
        """Tiles the loop nest runs (1 when streamed or whole)."""
        return self.bands * self.out_blocks * self.in_blocks

    @property
    def dram_bytes(self) -> int:
        """All DRAM traffic."""
        return self.act_read + self.weight_read + self.write

    def describe(self) -> str:
        """The tiling in words (`GroupCost.tiling`)."""
        o = self.order
        if o is LoopOrder.STREAM:
            return "rows streamed (fits as a single-op LBDF group)"
        if o is LoopOrder.WHOLE:
            return "whole op at once (cannot be tiled)"
        if o is LoopOrder.CHUNKS:
            return f"copied in {_n(self.bands, 'chunk')}"
        rows = f"{_n(self.bands, 'band')} of {self.band_rows} row{_s(self.band_rows)}"
        if o is LoopOrder.CHANNELS:
            return (f"channels outer: {_n(self.out_blocks, 'block')} of "
                    f"{_n(self.out_block, 'channel')} x {rows}")
        oc = f"{_n(self.out_blocks, 'block')} of {_n(self.out_block, 'output channel')}"
        ic = f"{_n(self.in_blocks, 'block')} of {_n(self.in_block, 'input channel')}"
        if o is LoopOrder.WEIGHTS_OUTER:
            return f"weights outer: {oc} x {rows} x {ic}; input read {_n(self.out_blocks, 'time')}"
        if o is LoopOrder.ROWS_OUTER:
            return f"rows outer: {rows} x {oc} x {ic}; weights read {_n(self.bands, 'time')}"
        return (f"blocks: {oc} x {rows} x {ic}; input read {_n(self.out_blocks, 'time')}, "
                f"weights {_n(self.bands, 'time')}")


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _n(n: int, what: str) -> str:
    return f"{n:,} {what}{_s(n)}"


def group_cost(graph: ComputeGraph, ops: Sequence[int], hw: HardwareConfig) -> GroupCost:
    """F_D, F_beta, cycles and energy of one op run on its own, streamed or tiled."""
    ops = tuple(sorted(ops))
    macs = sum(graph[o].macs for o in ops)
    d = hw.dtype_bytes
    if len(ops) != 1:
        b = boundary(graph, ops)
        weights = b.weight_elems * d
        rows = lbdf.peak_row_bytes(graph, ops) * d
        dram = (b.read_elems + b.write_elems) * d + weights
        return GroupCost(
            scheme=Scheme.LBL, ops=ops, buffer_bytes=weights + rows,
            weight_buffer_bytes=weights, dram_act_read=b.read_elems * d,
            dram_weight_read=weights, dram_write=b.write_elems * d, macs=macs, fits=False,
            reason="layer-by-layer runs one op per group",
            timing=timing(dram, buffer_traffic_elems(graph, ops) * d + dram, macs, hw,
                          weight_traffic_bytes=weight_traffic_bytes(graph, ops, hw, weights)),
            failure=Failure.NOT_SINGLE_OP)
    t = layer_tiling(graph, ops[0], hw)
    return GroupCost(
        scheme=Scheme.LBL, ops=ops, buffer_bytes=t.buffer_bytes,
        weight_buffer_bytes=t.weight_buffer_bytes, dram_act_read=t.act_read,
        dram_weight_read=t.weight_read, dram_write=t.write, macs=macs, fits=t.fits,
        reason=t.reason,
        timing=timing(t.dram_bytes, buffer_traffic_elems(graph, ops) * d + t.dram_bytes,
                      macs, hw, t.cycles,
                      weight_traffic_bytes(graph, ops, hw, t.weight_read)),
        failure=None if t.fits else Failure.TILE_OVER_BUFFER,
        tiles=t.tiles, tiling=t.describe(), reread_act_bytes=t.reread_act,
        reread_weight_bytes=t.reread_weight, schedule=t)


@lru_cache(maxsize=8192)
def layer_tiling(graph: ComputeGraph, o: int, hw: HardwareConfig) -> LayerTiling:
    """How op `o` runs on its own on `hw`: streamed if it fits as a single-op LBDF group,
    else the fitting tiling with the least DRAM traffic (ties: the fewest input-channel blocks,
    i.e. partial sums carried across tiles only where needed; then the fewest tiles; then the
    smaller buffer; then weights outer, rows outer, blocks), or the smallest tile, flagged
    `fits = False`, when none fits."""
    single = lbdf.group_cost(graph, (o,), hw)
    if single.fits:
        return LayerTiling(
            op=o, order=LoopOrder.STREAM, band_rows=0, bands=1, out_block=0, out_blocks=1,
            in_block=0, in_blocks=1, buffer_bytes=single.buffer_bytes,
            weight_buffer_bytes=single.weight_buffer_bytes, act_read=single.dram_act_read,
            weight_read=single.dram_weight_read, write=single.dram_write, reread_act=0,
            reread_weight=0, fits=True, reason="", cycles=single.timing.cycles)
    layer = Layer(graph, o, hw.dtype_bytes)
    split = (hw.weight_capacity, hw.activation_capacity) if hw.is_split else None
    tiled = layer.tiling(hw.buffer_bytes, split)
    return replace(tiled, cycles=layer_cycles(layer, tiled, hw)) if tiled.fits else tiled


# --- the geometry of a layer -----------------------------------------------------------------


def _blocks(n: int) -> np.ndarray:
    """Candidate block sizes for a dimension of `n`: the smallest block giving each possible
    block count, ceil(n / k) for k = 1..n (ascending)."""
    return np.unique(-(-n // np.arange(1, n + 1, dtype=np.int64)))


def _fit_count(n: int, most: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Blocks of at most `most` (>= 1) over a dimension of `n`: (block size, block count),
    the block size the smallest giving that count."""
    count = -(-n // np.minimum(most, n))
    size = -(-n // count)
    return size, -(-n // size)


@dataclass(frozen=True, slots=True)
class _Banded:
    """An input tensor read in row bands: its reference, rows, bytes per row per channel
    unit (matrix ops: per input channel) and the rows each output row reads."""

    ref: int
    height: int
    unit_row: int
    lo: np.ndarray
    hi: np.ndarray


class Layer:
    """The geometry of one op as a tiled layer sees it (shared by the cost model and the
    simulator's `simulator.engine.layer`). Sizes are in bytes (`d` bytes per element).

    Attributes:
        graph, op, d: The network, the op and `dtype_bytes`.
        form: "matrix" (a convolution with one group, a linear layer), "channels"
            (channel-separable: depthwise/grouped convolution, pooling, elementwise, resize,
            pad, slice), "concat" (along channels), "reduce" (global pooling), "chunks"
            (layout ops) or "whole" (cannot be tiled).
        refs: The distinct input tensors, in argument order.
        writes: Whether the output is written to DRAM (read outside or a network output).
    """

    def __init__(self, graph: ComputeGraph, o: int, d: int) -> None:
        self.graph, self.op, self.d = graph, graph[o], d
        op = self.op
        self.refs = tuple(dict.fromkeys(op.inputs))
        self.shapes = {r: graph.tensor_shape(r) for r in self.refs}
        self.writes = o in graph.outputs_of((o,))
        self.out_elems = op.output_elems
        self.weights = op.weight_reads
        self.form = _form(op)
        self.banded: list[_Banded] = []
        self.held_block: list[tuple[int, int]] = []  # (ref, bytes per channel unit)
        self.held_whole: list[int] = []  # refs held whole for the whole op
        self.gather = False  # an embedding (chunks reading their table rows)
        getattr(self, f"_init_{self.form}")()

    # --- per form --------------------------------------------------------------------------

    def _init_matrix(self) -> None:
        op, d = self.op, self.d
        (si,), so = op.input_shapes[:1], op.output_shape
        if op.kind is OpKind.LINEAR:  # a product over the last axis; the others are width
            self.c_in, self.c_out = si[-1], so[-1]
            self.h_in = self.h_out = 1
            lo = hi = np.zeros(1, dtype=np.int64)
        else:
            self.c_in, self.c_out, self.h_in, self.h_out = si[1], so[1], si[2], so[2]
            deps = row_deps(self.graph)
            lo, hi = deps.lo[op.id][0], deps.hi[op.id][0]
        self.in_row = d * math.prod(si) // (self.c_in * self.h_in)  # one channel, one row
        self.out_row = self.out_elems // (self.c_out * self.h_out)  # elements
        self.per_oc = self.weights // self.c_out
        self.shared = self.weights - self.per_oc * self.c_out  # held whole (unused in the zoo)
        self.q, self.bias = divmod(self.per_oc, self.c_in)
        self.banded = [_Banded(op.inputs[0], self.h_in, self.in_row, lo, hi)]

    def _init_channels(self) -> None:
        op, d = self.op, self.d
        so = op.output_shape
        self.units = op.groups if op.kind in (OpKind.CONV, OpKind.DWCONV) else so[1]
        self.h_out = so[2]
        self.out_unit_row = d * self.out_elems // (self.units * self.h_out)
        self.w_unit = self.weights // self.units
        self.shared = self.weights - self.w_unit * self.units
        deps = row_deps(self.graph)
        slot = {r: k for k, r in reversed(list(enumerate(op.inputs)))}
        for r in self.refs:
            s = self.shapes[r]
            elems = math.prod(s)
            if s[1] % self.units:  # a channel broadcast: held whole
                self.held_whole.append(r)
            elif s[2] == 1 < self.h_out:  # a per-channel vector (the SE scale)
                self.held_block.append((r, d * elems // self.units))
            else:
                self.banded.append(_Banded(r, s[2], d * elems // (self.units * s[2]),
                                           deps.lo[op.id][slot[r]], deps.hi[op.id][slot[r]]))

    def _init_concat(self) -> None:
        so = self.op.output_shape
        self.units, self.h_out = so[1], so[2]
        self.out_unit_row = self.d * self.out_elems // (self.units * self.h_out)
        self.shared, self.w_unit = self.weights, 0  # no weights; held whole if any
        rows = np.arange(self.h_out, dtype=np.int64)
        # one virtual input of all channels (every input has the output's rows and width)
        self.banded = [_Banded(self.refs[0], self.h_out, self.out_unit_row, rows, rows)]
        self.pieces: list[tuple[int, int, int]] = []  # (ref, first channel, channels)
        at = 0
        for r, s in zip(self.op.inputs, self.op.input_shapes, strict=True):
            self.pieces.append((r, at, s[1]))
            at += s[1]

    def _init_reduce(self) -> None:
        si = self.op.input_shapes[0]
        self.units, self.h_in = si[1], si[2]
        self.in_unit_row = self.d * math.prod(si) // (self.units * self.h_in)
        self.acc_unit = self.out_elems // self.units  # elements of one channel's sum
        self.shared, self.w_unit = self.weights, 0
        rows = np.arange(self.h_in, dtype=np.int64)
        self.banded = [_Banded(self.op.inputs[0], self.h_in, self.in_unit_row, rows, rows)]

    def _init_chunks(self) -> None:
        # an embedding reads the table rows of each chunk's ids with the chunk (section 9.8)
        self.gather = is_embedding(self.op)
        self.shared = 0 if self.gather else self.weights
        # the smallest chunk: one element, or one line of a softmax / normalisation
        self.line = _line_elems(self.op)
        self.lines = max(1, self.out_elems // self.line)

    def _init_heads(self) -> None:
        (sa, sb), so = self.op.input_shapes, self.op.output_shape
        self.heads = math.prod(so[:-2])
        self.m_rows, self.k, self.n = int(sa[-2]), int(sa[-1]), int(sb[-1])
        self.shared = self.weights  # none in practice

    def _init_whole(self) -> None:
        self.shared = self.weights

    # --- bands -----------------------------------------------------------------------------

    def band_list(self, rows_per_band: int) -> list[Band]:
        """The row bands of `rows_per_band` output rows (global pooling: input rows)."""
        h = self.h_in if self.form == "reduce" else self.h_out
        out = []
        for r0 in range(0, h, rows_per_band):
            r1 = min(r0 + rows_per_band, h) - 1
            out.append(Band(r0, r1, tuple(int(b.lo[r0]) for b in self.banded),
                            tuple(int(b.hi[r1]) for b in self.banded)))
        return out

    def _band_stats(self, ts: np.ndarray) -> dict[str, np.ndarray]:
        """Per candidate band height: band count, rows read per banded input over one pass,
        and the (input rows, output rows) of the widest full band and of the last band."""
        h = self.h_in if self.form == "reduce" else self.h_out
        counts = -(-h // ts)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        cand = np.repeat(np.arange(len(ts)), counts)
        r0 = (np.arange(int(counts.sum())) - starts[cand]) * ts[cand]
        r1 = np.minimum(r0 + ts[cand], h) - 1
        out_rows = r1 - r0 + 1
        last = starts + counts - 1
        stats = {"count": counts, "out_full": ts, "out_last": out_rows[last],
                 "starts": starts, "out_rows": out_rows}
        stats["in_rows"] = [b.hi[r1] - b.lo[r0] + 1 for b in self.banded]
        stats["read"] = [np.add.reduceat(rows, starts) for rows in stats["in_rows"]]
        full = out_rows == ts[cand]
        stats["in_full"] = [np.maximum.reduceat(np.where(full, rows, 0), starts)
                            for rows in stats["in_rows"]]
        stats["in_last"] = [rows[last] for rows in stats["in_rows"]]
        return stats

    def _pass_bytes(self, st: dict[str, np.ndarray], units: int) -> np.ndarray:
        """Per candidate band height, the DRAM bytes of one pass over the banded inputs
        (rows read by the bands, a tensor at least whole)."""
        return sum((np.maximum(r, b.height) * b.unit_row * units
                    for r, b in zip(st["read"], self.banded, strict=True)),
                   start=np.zeros(len(st["count"]), dtype=np.int64))

    # --- the tiling search -----------------------------------------------------------------

    def ideal_read(self) -> int:
        """Input bytes when every input is read once."""
        return self.d * sum(math.prod(s) for s in self.shapes.values())

    def tiling(self, buffer: int, split: tuple[int, int] | None = None) -> LayerTiling:
        """The fitting tiling with the least DRAM traffic, or the smallest tile (not
        fitting). `split`: (weight buffer, activation buffer) bytes when the buffer is split:
        a tile's weights must fit the one and its activations (inputs, outputs, partial sums)
        the other; None: both share `buffer`."""
        self._split = split
        try:
            return getattr(self, f"_tile_{self.form}")(buffer)
        finally:
            self._split = None

    _split: tuple[int, int] | None = None

    def _fits(self, weight: Any, act: Any, buffer: int) -> Any:
        """Whether a tile of `weight` weight bytes and `act` activation bytes fits (arrays
        element-wise): their sum the shared buffer, or each its own buffer when split."""
        if self._split is None:
            return weight + act <= buffer
        return (weight <= self._split[0]) & (act <= self._split[1])

    def _result(self, order: LoopOrder, buffer: int, need: int, weight_buf: int, act: int,
                weight_read: int, band_rows: int = 0, bands: int = 1, out_block: int = 0,
                out_blocks: int = 1, in_block: int = 0, in_blocks: int = 1,
                smallest: str = "") -> LayerTiling:
        fits = bool(self._fits(weight_buf, need - weight_buf, buffer))
        over = (f"needs {need:,} B > buffer {buffer:,} B" if self._split is None else
                f"needs {weight_buf:,} B of weights (weight buffer {self._split[0]:,} B) and "
                f"{need - weight_buf:,} B of activations (activation buffer "
                f"{self._split[1]:,} B)")
        reason = "" if fits else (
            f"'{self.op.name}' cannot run layer by layer: its smallest tile ({smallest}) "
            f"{over}")
        return LayerTiling(
            op=self.op.id, order=order, band_rows=int(band_rows), bands=int(bands),
            out_block=int(out_block), out_blocks=int(out_blocks), in_block=int(in_block),
            in_blocks=int(in_blocks), buffer_bytes=int(need), weight_buffer_bytes=int(weight_buf),
            act_read=int(act), weight_read=int(weight_read),
            write=self.d * self.out_elems if self.writes else 0,
            reread_act=int(act) - self.ideal_read(),
            reread_weight=int(weight_read) - self.d * self.weights, fits=fits, reason=reason)

    def _tile_matrix(self, buffer: int) -> LayerTiling:
        d, acc = self.d, max(ACC_BYTES, self.d)
        ts = _blocks(self.h_out)
        st = self._band_stats(ts)
        pairs = [(st["in_full"][0], st["out_full"]), (st["in_last"][0], st["out_last"])]
        n_h = st["count"][:, None]
        x_pass = self._pass_bytes(st, self.c_in)[:, None]
        cos = _blocks(self.c_out)
        co = cos[None, :]  # the grid: rows are band heights, columns output-block sizes
        n_o = -(-self.c_out // co)
        shared = self.d * self.shared
        w_all = d * self.per_oc * self.c_out
        best = None
        for rank, order in enumerate((LoopOrder.WEIGHTS_OUTER, LoopOrder.ROWS_OUTER,
                                      LoopOrder.BLOCKS)):
            ci_max = (self._ci_max(order, buffer - shared, co, pairs, acc)
                      if self._split is None else self._ci_max_split(order, co, pairs, acc))
            ci, n_i = _fit_count(self.c_in, np.maximum(ci_max, 1))
            if order is LoopOrder.BLOCKS:  # distinct from weights outer only when n_i > 1
                ok = (ci_max >= 1) & (n_i > 1)
            else:  # one input-channel block: the output tile needs no wider partial sums
                acts, w = self._matrix_parts(order, co, self.c_in, 1, pairs, acc)
                whole = self._fits(w + shared, acts, buffer)
                ok = whole | (ci_max >= 1)
                n_i, ci = np.where(whole, 1, n_i), np.where(whole, self.c_in, ci)
            if not ok.any():
                continue
            acts, w = self._matrix_parts(order, co, ci, n_i, pairs, acc)
            need = acts + w + shared
            ok &= self._fits(w + shared, acts, buffer)
            act = x_pass if order is LoopOrder.ROWS_OUTER else n_o * x_pass
            wr = d * self.weights if order is LoopOrder.WEIGHTS_OUTER else shared + n_h * w_all
            act, wr = np.broadcast_to(act, need.shape), np.broadcast_to(wr, need.shape)
            tiles = n_h * n_o * n_i
            key = np.where(ok, (act + wr).astype(np.float64), np.inf)
            flat = np.lexsort((np.broadcast_to(co, need.shape).ravel(), need.ravel(),
                               tiles.ravel(), n_i.ravel(), key.ravel()))[0]
            i, j = np.unravel_index(flat, need.shape)
            value = (key[i, j], n_i[i, j], tiles[i, j], need[i, j], rank)
            if best is None or value < best[0]:
                best = (value, order, int(ts[i]), int(cos[j]), int(ci[i, j]), int(n_i[i, j]),
                        int(need[i, j]), int(act[i, j]), int(wr[i, j]))
        if best is None:
            return self._matrix_smallest(buffer, acc)
        _, order, t, c_o, c_i, n_i, need, act, wr = best
        return self._result(
            order, buffer, need, self._matrix_weight_buffer(order, c_o, c_i), act, wr,
            band_rows=t, bands=-(-self.h_out // t), out_block=c_o,
            out_blocks=-(-self.c_out // c_o), in_block=c_i, in_blocks=n_i)

    def _ci_max(self, order: LoopOrder, room: int, co: np.ndarray, pairs: list,
                acc: int) -> np.ndarray:
        """The most input channels per block that fit `room` bytes with partial sums held
        (several input-channel blocks), per (band height, output block); < 1: none."""
        d, q, bias = self.d, self.q, self.bias
        most = None
        for p_in, p_out in pairs:
            p_in, p_out = p_in[:, None], p_out[:, None]
            sums = acc * co * self.out_row * p_out
            if order is LoopOrder.WEIGHTS_OUTER:
                free = room - d * co * self.per_oc - sums
                m = free // np.maximum(self.in_row * p_in, 1)
            elif order is LoopOrder.ROWS_OUTER:
                free = room - self.in_row * self.c_in * p_in - sums - d * co * bias
                m = free // np.maximum(d * co * q, 1) if q else np.where(free >= 0, self.c_in, 0)
            else:
                free = room - sums - d * co * bias
                m = free // (d * co * q + self.in_row * p_in)
            most = m if most is None else np.minimum(most, m)
        return np.where(most < 0, 0, most)

    def _ci_max_split(self, order: LoopOrder, co: np.ndarray, pairs: list,
                      acc: int) -> np.ndarray:
        """`_ci_max` with split buffers: the weight tile within the weight buffer (less the
        shared weights), the input block and partial sums within the activation buffer."""
        d, q, bias = self.d, self.q, self.bias
        w_room, a_room = self._split[0] - d * self.shared, self._split[1]
        big = np.iinfo(np.int64).max // 4
        most = None
        for p_in, p_out in pairs:
            p_in, p_out = p_in[:, None], p_out[:, None]
            sums = acc * co * self.out_row * p_out
            if order is LoopOrder.WEIGHTS_OUTER:
                m = (a_room - sums) // np.maximum(self.in_row * p_in, 1)
                m = np.where(d * co * self.per_oc <= w_room, m, -1)
            else:
                w_free = w_room - d * co * bias
                m_w = w_free // np.maximum(d * co * q, 1) if q else np.where(w_free >= 0, big, -1)
                if order is LoopOrder.ROWS_OUTER:
                    a_free = a_room - self.in_row * self.c_in * p_in - sums
                    m = np.where(a_free >= 0, np.minimum(m_w, self.c_in), -1)
                else:
                    m = np.minimum(m_w, (a_room - sums) // np.maximum(self.in_row * p_in, 1))
            most = m if most is None else np.minimum(most, m)
        return np.where(most < 0, 0, most)

    def _matrix_need(self, order: LoopOrder, co: np.ndarray, ci: np.ndarray, n_i: np.ndarray,
                     pairs: list, acc: int) -> np.ndarray:
        """Peak bytes of a matrix tiling (without the shared weights)."""
        acts, w = self._matrix_parts(order, co, ci, n_i, pairs, acc)
        return acts + w

    def _matrix_parts(self, order: LoopOrder, co: np.ndarray, ci: np.ndarray, n_i: np.ndarray,
                      pairs: list, acc: int) -> tuple[np.ndarray, np.ndarray]:
        """`_matrix_need` as (activation bytes, weight bytes)."""
        d = self.d
        acc_b = np.where(n_i > 1, acc, d)
        peak = None
        for p_in, p_out in pairs:
            p_in, p_out = p_in[:, None], p_out[:, None]
            sums = acc_b * co * self.out_row * p_out
            x = self.in_row * (self.c_in if order is LoopOrder.ROWS_OUTER else ci) * p_in
            v = x + sums
            peak = v if peak is None else np.maximum(peak, v)
        if order is LoopOrder.WEIGHTS_OUTER:
            w = d * co * self.per_oc
        else:
            w = d * co * (ci * self.q + self.bias)
        return peak, w

    def _matrix_weight_buffer(self, order: LoopOrder, c_o: int, c_i: int) -> int:
        if order is LoopOrder.WEIGHTS_OUTER:
            return self.d * (c_o * self.per_oc + self.shared)
        return self.d * (c_o * (c_i * self.q + self.bias) + self.shared)

    def _matrix_smallest(self, buffer: int, acc: int) -> LayerTiling:
        """The smallest matrix tile, not fitting: 1 output row of 1 output channel and 1
        input channel (input and weight blocks streamed)."""
        st = self._band_stats(np.ones(1, dtype=np.int64))
        pairs = [(st["in_full"][0], st["out_full"]), (st["in_last"][0], st["out_last"])]
        order = LoopOrder.BLOCKS if self.c_in > 1 else LoopOrder.WEIGHTS_OUTER
        one = np.ones((1, 1), dtype=np.int64)
        need = int(self._matrix_need(order, one, one, one * self.c_in, pairs, acc)[0, 0]) \
            + self.d * self.shared
        n_h = int(st["count"][0])
        act = self.c_out * int(self._pass_bytes(st, self.c_in)[0])
        wr = self.d * (self.shared + n_h * self.per_oc * self.c_out) \
            if order is LoopOrder.BLOCKS else self.d * self.weights
        return self._result(
            order, buffer, need, self._matrix_weight_buffer(order, 1, 1), act, wr,
            band_rows=1, bands=n_h, out_block=1, out_blocks=self.c_out, in_block=1,
            in_blocks=self.c_in,
            smallest="1 output row of 1 output channel and 1 input channel")

    def _tile_channels(self, buffer: int) -> LayerTiling:
        d = self.d
        ts = _blocks(self.h_in if self.form == "reduce" else self.h_out)
        st = self._band_stats(ts)
        const = d * self.shared + sum(d * math.prod(self.shapes[r]) for r in self.held_whole)
        held = self.held_unit()
        per_band = self._unit_band_bytes(st)  # per unit, the widest band
        peak_unit = held + per_band
        if self._split is None:
            most = (buffer - const) // peak_unit
        else:  # weights (shared, then per unit) and the rest per unit, each in its buffer
            w_unit = 0 if self.form == "reduce" else d * self.w_unit
            w_room = self._split[0] - d * self.shared
            a_room = self._split[1] - (const - d * self.shared)
            most = np.minimum(w_room // w_unit if w_unit else np.where(w_room >= 0, self.units, 0),
                              a_room // np.maximum(peak_unit - w_unit, 1))
        ok = most >= 1
        u, n_c = _fit_count(self.units, np.maximum(most, 1))
        need = const + u * peak_unit
        act = self._pass_bytes(st, self.units) + \
            sum(d * math.prod(self.shapes[r]) for r in self.held_whole) + \
            sum(b * self.units for _, b in self.held_block)
        tiles = st["count"] * n_c
        order = LoopOrder.CHANNELS
        if not ok.any():  # the smallest tile: one row of one channel (group)
            k = 0
            smallest = ("1 input row of 1 channel" if self.form == "reduce" else
                        "1 output row of 1 channel group" if self.op.groups > 1 else
                        "1 output row of 1 channel")
            return self._result(order, buffer, int(const + peak_unit[k]),
                                d * (self.shared + self.w_unit), int(act[k]),
                                d * self.weights, band_rows=1, bands=int(st["count"][k]),
                                out_block=1, out_blocks=self.units, smallest=smallest)
        k = int(np.lexsort((ts, need, tiles, np.where(ok, act, np.iinfo(np.int64).max)))[0])
        return self._result(order, buffer, int(need[k]),
                            d * (self.shared + int(u[k]) * self.w_unit), int(act[k]),
                            d * self.weights, band_rows=int(ts[k]), bands=int(st["count"][k]),
                            out_block=int(u[k]), out_blocks=int(n_c[k]))

    _tile_concat = _tile_channels
    _tile_reduce = _tile_channels

    def held_unit(self) -> int:
        """Bytes per channel unit held across a block's bands: weights, per-channel vectors,
        running sums."""
        if self.form == "reduce":
            return max(ACC_BYTES, self.d) * self.acc_unit
        return self.d * self.w_unit + sum(b for _, b in self.held_block)

    def _unit_band_bytes(self, st: dict[str, np.ndarray]) -> np.ndarray:
        """Per candidate band height, the largest bytes per channel unit of one band: its
        banded inputs and its output rows."""
        per = sum(rows * b.unit_row for rows, b in zip(st["in_rows"], self.banded, strict=True))
        if self.form != "reduce":
            per = per + st["out_rows"] * self.out_unit_row
        return np.maximum.reduceat(per, st["starts"])

    def chunk_split(self, n: int) -> tuple[np.ndarray, list[np.ndarray]]:
        """Output and per-input elements of each of `n` chunks (even splits; of whole lines
        for a softmax or normalisation)."""
        j = np.arange(n + 1, dtype=np.int64)
        lines = self.lines

        def split(total: int) -> np.ndarray:
            if self.line == 1:
                return np.diff(j * total // n)
            return np.diff(j * lines // n) * (total // lines)

        return split(self.out_elems), [split(math.prod(self.shapes[r])) for r in self.refs]

    def weight_chunks(self, n: int) -> np.ndarray:
        """Weight elements each of `n` chunks reads: an embedding's table rows, split as its
        output; zeros for any other op (its weights are held whole, `shared`)."""
        if not self.gather:
            return np.zeros(n, dtype=np.int64)
        return self.chunk_split(n)[0]

    def _chunk_need(self, n: int) -> int:
        out, ins = self.chunk_split(n)
        rows = self.weight_chunks(n)
        if self._split is not None:  # the rows (weights) and the rest each their own peak
            return self.d * (int((out + sum(ins)).max()) + int(rows.max()) + self.shared)
        return self.d * (int((out + sum(ins) + rows).max()) + self.shared)

    def _chunk_weight_buffer(self, n: int) -> int:
        return self.d * (int(self.weight_chunks(n).max()) + self.shared)

    def _tile_chunks(self, buffer: int) -> LayerTiling:
        d = self.d

        def bound(n: int) -> int:  # an upper bound of the chunk need, non-increasing in n
            if self.line > 1:  # whole lines: the largest chunk has ceil(lines / n) of them
                per_line = (self.out_elems + sum(map(math.prod, self.shapes.values()))) \
                    // self.lines
                return d * (-(-self.lines // n) * per_line + self.shared)
            rows = -(-self.out_elems // n) if self.gather else 0
            return d * (-(-self.out_elems // n) + sum(-(-math.prod(s) // n)
                                                      for s in self.shapes.values())
                        + self.shared + rows)

        shared = d * self.shared

        def fits(n: int) -> bool:
            # an embedding's table rows are weights (`_chunk_weight_buffer`): with split
            # buffers they take the weight buffer, the chunk's ids and output the other
            weight = shared + (d * -(-self.out_elems // n) if self.gather else 0)
            return bool(self._fits(weight, bound(n) - weight, buffer))

        lo, hi = 1, self.lines
        if not fits(hi):
            smallest = "1 element" if self.line == 1 else f"1 line of {self.line:,} elements"
            return self._result(LoopOrder.CHUNKS, buffer, self._chunk_need(hi),
                                self._chunk_weight_buffer(hi), self.ideal_read(),
                                d * self.weights, bands=hi, smallest=smallest)
        while lo < hi:  # the fewest chunks whose bound fits
            mid = (lo + hi) // 2
            if fits(mid):
                hi = mid
            else:
                lo = mid + 1
        return self._result(LoopOrder.CHUNKS, buffer, self._chunk_need(lo),
                            self._chunk_weight_buffer(lo), self.ideal_read(), d * self.weights,
                            bands=lo)

    def heads_need(self, rows: int) -> int:
        """Bytes a head holds with `rows` rows of the first operand per chunk: the second
        operand's head, the chunk and its output rows."""
        return self.d * (self.k * self.n + rows * (self.k + self.n) + self.shared)

    def _tile_heads(self, buffer: int) -> LayerTiling:
        shared = self.d * self.shared

        def fits(rows: int) -> bool:
            return bool(self._fits(shared, self.heads_need(rows) - shared, buffer))

        lo, hi = 1, self.m_rows  # the most rows per chunk that fit (the need grows with them)
        if not fits(1):
            return self._result(LoopOrder.HEADS, buffer, self.heads_need(1), self.d * self.shared,
                                self.ideal_read(), self.d * self.weights, band_rows=1,
                                bands=self.m_rows, out_block=1, out_blocks=self.heads,
                                smallest="one head of the second operand and one row")
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
        rows, count = _fit_count(self.m_rows, np.array([lo]))
        return self._result(LoopOrder.HEADS, buffer, self.heads_need(int(rows[0])),
                            self.d * self.shared, self.ideal_read(), self.d * self.weights,
                            band_rows=int(rows[0]), bands=int(count[0]), out_block=1,
                            out_blocks=self.heads)

    def _tile_whole(self, buffer: int) -> LayerTiling:
        d = self.d
        need = self.ideal_read() + d * (self.out_elems + self.weights)
        return self._result(LoopOrder.WHOLE, buffer, need, d * self.weights,
                            self.ideal_read(), d * self.weights,
                            smallest=f"the whole {self.op.kind.value} op")


def _form(op: Op) -> str:
    """How an op tiles (`Layer.form`)."""
    rank4 = len(op.output_shape) == 4 and all(len(s) == 4 for s in op.input_shapes)
    kind = op.kind
    if is_embedding(op):  # token ids in chunks, each reading its table rows
        return "chunks"
    if kind is OpKind.LINEAR and len(op.input_shapes) == 1 and op.weight_elems \
            and op.input_shapes[0][:-1] == op.output_shape[:-1]:
        return "matrix"
    if kind in (OpKind.CONV, OpKind.DWCONV) and rank4 and len(op.input_shapes) == 1:
        if op.groups == 1:
            return "matrix"
        if op.input_shapes[0][1] % op.groups == 0 and op.output_shape[1] % op.groups == 0:
            return "channels"
    if kind is OpKind.GLOBAL_POOL and rank4 and op.input_shapes[0][1] == op.output_shape[1]:
        return "reduce"
    if kind is OpKind.CONCAT and rank4 and op.attr("axis", 1) in (1, -3) and all(
            s[0] == op.output_shape[0] and s[2:] == op.output_shape[2:]
            for s in op.input_shapes):
        return "concat"
    if kind in (OpKind.POOL, OpKind.ELTWISE_UNARY, OpKind.ELTWISE_BINARY, OpKind.BATCHNORM,
                OpKind.RESIZE, OpKind.PAD, OpKind.SLICE) and rank4 and all(
            s[1] in (op.output_shape[1], 1) for s in op.input_shapes) and any(
            s[1] == op.output_shape[1] for s in op.input_shapes):
        return "channels"
    if kind is OpKind.MATMUL and len(op.input_shapes) == 2 and len(set(op.inputs)) == 2:
        (sa, sb), so = op.input_shapes, op.output_shape
        if len(sa) == len(sb) == len(so) >= 2 and sa[:-2] == sb[:-2] == so[:-2] \
                and sa[-1] == sb[-2] and so[-2:] == (sa[-2], sb[-1]):
            return "heads"
    if kind in (OpKind.SOFTMAX, OpKind.NORM) and _line_elems(op) > 1:
        return "chunks"
    if kind in (OpKind.SOFTMAX, OpKind.OPAQUE, OpKind.LINEAR, OpKind.CONV, OpKind.DWCONV,
                OpKind.GLOBAL_POOL, OpKind.POOL, OpKind.RESIZE, OpKind.NORM, OpKind.MATMUL):
        return "whole"
    return "chunks"  # reshape, transpose, concat/slice/pad across axes, elementwise on vectors



def _line_elems(op: Op) -> int:
    """Elements of one line of a softmax or normalisation whose statistics span trailing axes
    of its input (a GroupNorm group: its channels of the map), the unit it can be chunked by;
    1 for any other op (layout ops chunk by elements), 0 when the reduced axes are not
    trailing (it cannot be chunked)."""
    if op.kind not in (OpKind.SOFTMAX, OpKind.NORM):
        return 1
    shape = op.input_shapes[0]
    rank = len(shape)
    axes = reduced_axes(op, rank)
    first = min(axes, default=rank)
    if axes != set(range(first, rank)) or len(op.inputs) != 1 \
            or tuple(shape) != tuple(op.output_shape):
        return 0
    groups = int(op.attr("groups", 1) or 1) if op.kind is OpKind.NORM else 1
    line = math.prod(shape[first:])
    if first == 1 and groups > 1 and line % groups == 0:  # a GroupNorm group
        line //= groups
    return line

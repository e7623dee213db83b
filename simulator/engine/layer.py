"""A tiled layer (an op run on its own that does not stream its rows), tile by tile.

The tiling is the one the analytic model picks (`simulator.cost.lbl.layer_tiling`) and the
geometry is the model's own (`simulator.cost.lbl.Layer`), so the simulator moves exactly the
DRAM bytes the model counts and peaks at exactly its `buffer_bytes`. Tiles are synchronous: a
tile's loads are queued together and the PE array waits for them; its output block is written
back, and waited for, when its last input-channel block has been accumulated. Nothing is
double-buffered, so the next tile's loads start when the previous tile is done.

* Matrix ops (`LoopOrder.WEIGHTS_OUTER`, `ROWS_OUTER`, `BLOCKS`): per output-channel block
  (weights outer: its weights loaded once), row band (rows outer: the band's input, all
  channels, loaded once) and input-channel block, the input block and (rows outer, blocks) the
  weight block are loaded, the partial sums of the output block are held from its first input
  block to its write-back.
* Channel-separable ops (`LoopOrder.CHANNELS`): per channel block, its weights and per-channel
  vectors (the SE scale) are loaded once; per row band its input rows are loaded, the output
  rows computed and written; a global pooling holds its running sums over the bands instead.
* Layout ops, softmaxes and normalisations over trailing axes (`LoopOrder.CHUNKS`): chunk by
  chunk (of elements, or of whole lines), input elements in, output elements out.
* Products of two activations (`LoopOrder.HEADS`): per head, the second operand's head loaded
  and held; chunk by chunk the first operand's rows in, the output rows out.
* `LoopOrder.WHOLE`: everything at once.

Rows of an input that no band reads (a stride skipping the last rows) are read with the last
band of each pass and dropped, so the traffic is whole tensors, as in the analytic accounting.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from simulator.cost.lbl import ACC_BYTES, Layer, LayerTiling, LoopOrder
from simulator.engine.machine import Machine
from simulator.workload.graph import ComputeGraph

__all__ = ["run_layer"]


def run_layer(m: Machine, graph: ComputeGraph, o: int, tiling: LayerTiling,
              ) -> Generator[Any, Any, None]:
    """simpy process body running op `o` on its own with the given (tiled) `tiling`."""
    if tiling.streamed:
        raise ValueError(f"op {graph[o].name!r} streams its rows: run it as an LBDF group")
    layer = Layer(graph, o, m.hw.dtype_bytes)
    yield from _Run(m, layer, tiling).run()


def _ranges(n: int, size: int) -> list[tuple[int, int]]:
    """(start, length) of the blocks of `size` over `n`."""
    return [(a, min(size, n - a)) for a in range(0, n, size)]


class _Run:
    def __init__(self, m: Machine, layer: Layer, tiling: LayerTiling) -> None:
        self.m, self.layer, self.t = m, layer, tiling
        self.d = layer.d
        self.op = layer.op
        graph = layer.graph
        self.names = {r: graph.input_names[-r - 1] if r < 0 else graph[r].name
                      for r in layer.refs}
        self.w_name = f"{self.op.name}.weights"
        self.macs_done = 0
        self.work_done = 0
        self.ready = 0  # the cycle the data held across tiles is usable

    # --- helpers --------------------------------------------------------------------------

    def _load(self, nbytes: int, what: str, tensor: str,
              role: str = "activations") -> Generator[Any, Any, int]:
        """Take `nbytes` of the buffer holding `role` and queue their DRAM read; returns when
        they are usable."""
        if nbytes <= 0:
            return 0
        yield from self.m.alloc(nbytes, what, role)
        return self.m.transfer(nbytes, tensor)

    def _compute(self, work: int, total: int, reads: int) -> Generator[Any, Any, None]:
        """Compute `work` of the op's `total` work units (MACs split exactly)."""
        self.work_done += work
        macs = self.op.macs * self.work_done // total - self.macs_done
        self.macs_done += macs
        yield from self.m.compute(macs, reads)

    def _write(self, nbytes: int) -> Generator[Any, Any, None]:
        if self.layer.writes and nbytes > 0:
            yield from self.m.wait_until(self.m.transfer(nbytes, self.op.name, write=True))

    def _drop(self, nbytes: int, ref: int) -> None:
        """Rows no tile needs: read with the last band (whole-tensor DMA) and dropped."""
        if nbytes > 0:
            self.m.transfer(nbytes, self.names[ref])

    def run(self) -> Generator[Any, Any, None]:
        shared = self.d * self.layer.shared
        self.ready = yield from self._load(shared, f"the weights of {self.op.name!r}",
                                           self.w_name, "weights")
        if self.t.order is LoopOrder.CHUNKS:
            yield from self._chunks()
        elif self.t.order is LoopOrder.HEADS:
            yield from self._heads()
        elif self.t.order is LoopOrder.WHOLE:
            yield from self._whole()
        elif self.t.order is LoopOrder.CHANNELS:
            yield from self._channels()
        else:
            yield from self._matrix()
        yield from self.m.free(shared, "weights")

    # --- matrix ops -------------------------------------------------------------------------

    def _matrix(self) -> Generator[Any, Any, None]:
        L, t, d, m = self.layer, self.t, self.d, self.m
        acc = max(ACC_BYTES, d) if t.in_blocks > 1 else d
        bands = L.band_list(t.band_rows)
        x_ref = L.banded[0].ref
        x_name = self.names[x_ref]
        unread = max(0, L.h_in - sum(b.in_rows(0) for b in bands)) * L.in_row * L.c_in
        total = L.c_out * L.h_out * L.c_in
        oc, ic = _ranges(L.c_out, t.out_block), _ranges(L.c_in, t.in_block)

        def weight_block(c_o: int, k: int, c_i: int) -> int:
            return d * c_o * (c_i * L.q + (L.bias if k == 0 else 0))

        if t.order is LoopOrder.ROWS_OUTER:
            for n, band in enumerate(bands):
                xb = L.in_row * L.c_in * band.in_rows(0)
                x_ready = yield from self._load(xb, f"band {n} of {x_name!r}", x_name)
                if n == len(bands) - 1:
                    self._drop(unread, x_ref)
                for _, c_o in oc:
                    sums = c_o * L.out_row * band.out_rows * acc
                    yield from m.alloc(sums, f"the partial sums of {self.op.name!r}")
                    for k, (_, c_i) in enumerate(ic):
                        wb = weight_block(c_o, k, c_i)
                        w_ready = yield from self._load(wb, f"a weight block of "
                                                        f"{self.op.name!r}", self.w_name,
                                                        "weights")
                        yield from m.wait_until(max(x_ready, w_ready, self.ready))
                        yield from self._compute(c_o * band.out_rows * c_i, total,
                                                 xb * c_i // L.c_in + wb)
                        yield from m.free(wb, "weights")
                    yield from self._write(d * c_o * L.out_row * band.out_rows)
                    yield from m.free(sums)
                yield from m.free(xb)
            return
        for _, c_o in oc:  # weights outer, blocks
            held = d * c_o * L.per_oc if t.order is LoopOrder.WEIGHTS_OUTER else 0
            w_ready = yield from self._load(held, f"the weights of {c_o} output channels of "
                                            f"{self.op.name!r}", self.w_name, "weights")
            for n, band in enumerate(bands):
                sums = c_o * L.out_row * band.out_rows * acc
                yield from m.alloc(sums, f"the partial sums of {self.op.name!r}")
                for k, (_, c_i) in enumerate(ic):
                    xb = L.in_row * c_i * band.in_rows(0)
                    x_ready = yield from self._load(xb, f"band {n} of {c_i} channels of "
                                                    f"{x_name!r}", x_name)
                    wb = 0 if held else weight_block(c_o, k, c_i)
                    b_ready = yield from self._load(wb, f"a weight block of {self.op.name!r}",
                                                    self.w_name, "weights")
                    yield from m.wait_until(max(x_ready, w_ready, b_ready, self.ready))
                    yield from self._compute(c_o * band.out_rows * c_i, total, xb + wb)
                    yield from m.free(xb)
                    yield from m.free(wb, "weights")
                if n == len(bands) - 1:
                    self._drop(unread, x_ref)
                yield from self._write(d * c_o * L.out_row * band.out_rows)
                yield from m.free(sums)
            yield from m.free(held, "weights")

    # --- channel-separable ops --------------------------------------------------------------

    def _channels(self) -> Generator[Any, Any, None]:
        L, t, d, m = self.layer, self.t, self.d, self.m
        reduce = L.form == "reduce"
        whole = 0
        for r in L.held_whole:
            nbytes = d * L.graph.tensor_elems(r)
            whole += nbytes
            ready = yield from self._load(nbytes, f"{self.names[r]!r} (whole)", self.names[r])
            self.ready = max(self.ready, ready)
        bands = L.band_list(t.band_rows)
        unread = [max(0, b.height - sum(band.in_rows(k) for band in bands)) * b.unit_row
                  for k, b in enumerate(L.banded)]
        total = L.units * (L.h_in if reduce else L.h_out)
        for u0, u in _ranges(L.units, t.out_block):
            block_ready = self.ready
            w = d * u * L.w_unit
            ready = yield from self._load(w, f"the weights of {u} channels of "
                                          f"{self.op.name!r}", self.w_name, "weights")
            block_ready = max(block_ready, ready)
            held = 0
            for r, per_unit in L.held_block:
                ready = yield from self._load(u * per_unit, f"{u} channels of "
                                              f"{self.names[r]!r}", self.names[r])
                block_ready = max(block_ready, ready)
                held += u * per_unit
            if reduce:
                held += u * L.acc_unit * max(ACC_BYTES, d)
                yield from m.alloc(u * L.acc_unit * max(ACC_BYTES, d),
                                   f"the running sums of {self.op.name!r}")
            for n, band in enumerate(bands):
                ready, xs = block_ready, 0
                for k, b in enumerate(L.banded):
                    nb = u * b.unit_row * band.in_rows(k)
                    yield from m.alloc(nb, f"band {n} of {self.names[b.ref]!r}")
                    xs += nb
                    for ref, nbytes in self._pieces(k, u0, u, b.unit_row * band.in_rows(k)):
                        ready = max(ready, m.transfer(nbytes, self.names[ref]))
                yield from m.wait_until(ready)
                out = 0 if reduce else u * L.out_unit_row * band.out_rows
                yield from m.alloc(out, f"band {n} of {self.op.name!r}")
                yield from self._compute(u * band.out_rows if not reduce else
                                         u * band.in_rows(0), total, xs)
                yield from m.free(xs)
                yield from self._write(out)
                yield from m.free(out)
                if n == len(bands) - 1:
                    for k, b in enumerate(L.banded):
                        self._drop(u * unread[k], b.ref)
            if reduce:
                yield from self._write(d * u * L.acc_unit)
            yield from m.free_both(held, w)
        yield from m.free(whole)

    def _pieces(self, k: int, u0: int, u: int, per_unit: int) -> list[tuple[int, int]]:
        """(tensor, bytes) read for banded input `k` by the channel block [u0, u0 + u): the
        concatenated inputs it spans, or the input itself."""
        L = self.layer
        if L.form != "concat":
            return [(L.banded[k].ref, u * per_unit)]
        out = []
        for ref, first, channels in L.pieces:
            n = min(u0 + u, first + channels) - max(u0, first)
            if n > 0:
                out.append((ref, n * per_unit))
        return out

    # --- layout and untileable ops -----------------------------------------------------------

    def _chunks(self) -> Generator[Any, Any, None]:
        L, d, m = self.layer, self.d, self.m
        outs, ins = L.chunk_split(self.t.bands)
        rows = L.weight_chunks(self.t.bands)
        for j in range(self.t.bands):
            ready, xs = self.ready, 0
            for r, sizes in zip(L.refs, ins, strict=True):
                nbytes = d * int(sizes[j])
                got = yield from self._load(nbytes, f"chunk {j} of {self.names[r]!r}",
                                            self.names[r])
                ready, xs = max(ready, got), xs + nbytes
            w = d * int(rows[j])
            if w:  # an embedding's table rows of this chunk's ids: weights
                got = yield from self._load(w, f"table rows of chunk {j}", self.w_name,
                                            "weights")
                ready = max(ready, got)
            out = d * int(outs[j])
            yield from m.alloc(out, f"chunk {j} of {self.op.name!r}")
            yield from m.wait_until(ready)
            yield from self._compute(int(outs[j]), L.out_elems, xs + w)
            yield from m.free_both(xs, w)
            yield from self._write(out)
            yield from m.free(out)

    def _heads(self) -> Generator[Any, Any, None]:
        L, d, m = self.layer, self.d, self.m
        a_ref, b_ref = L.op.inputs
        a_name, b_name = self.names[a_ref], self.names[b_ref]
        held = d * L.k * L.n
        for h in range(L.heads):
            b_ready = yield from self._load(held, f"head {h} of {b_name!r}", b_name)
            for r0, rows in _ranges(L.m_rows, self.t.band_rows):
                x = d * rows * L.k
                got = yield from self._load(x, f"rows {r0}.. of head {h} of {a_name!r}",
                                            a_name)
                out = d * rows * L.n
                yield from m.alloc(out, f"rows {r0}.. of head {h} of {self.op.name!r}")
                yield from m.wait_until(max(self.ready, b_ready, got))
                yield from self._compute(rows, L.heads * L.m_rows, x + held)
                yield from m.free(x)
                yield from self._write(out)
                yield from m.free(out)
            yield from m.free(held)

    def _whole(self) -> Generator[Any, Any, None]:
        L, d, m = self.layer, self.d, self.m
        ready, xs = self.ready, 0
        for r in L.refs:
            nbytes = d * L.graph.tensor_elems(r)
            got = yield from self._load(nbytes, f"{self.names[r]!r}", self.names[r])
            ready, xs = max(ready, got), xs + nbytes
        out = d * L.out_elems
        yield from m.alloc(out, f"the output of {self.op.name!r}")
        yield from m.wait_until(ready)
        yield from self._compute(1, 1, xs)
        yield from m.free(xs)
        yield from self._write(out)
        yield from m.free(out)

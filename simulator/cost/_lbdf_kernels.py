"""Compiled kernels of the LBDF cost model (`simulator.cost.lbdf`): a group's row schedule,
its line-buffer peak at row and at pixel granularity, its event order and its cycles, in one
call over flat per-graph tables.

The semantics are those of docs/cost-model.md, section 4.1 (and 5 for the cycles); this module
evaluates them with numba over int64 and float64 arrays, row by row and column by column,
instead of numpy calls per op. Every float it computes (row keys, paces, column phases and
orders) is the same IEEE operation on the same operands as the formulas of the documentation,
so the figures are exact, and `tests/simulator/cost/test_lbdf_fast.py` holds them equal to a
reference numpy implementation of those formulas.

A tensor is a *node* ``u``: network input ``-k - 1`` is node ``n_in - k - 1`` and op ``o`` is
node ``n_in + o``, so ascending nodes are ascending references (network inputs first), the
order of `ComputeGraph.inputs_of`. Within a group, tensor ``k`` is the k-th of its entering
tensors (ascending) and then its ops; rows of all tensors are laid end to end (``offs``), and
so are the columns of image rows (``coffs``).

`LbdfTables` holds the tables of one graph (built once per graph, `lbdf_tables`); `schedule`
is the kernel of `simulator.cost.lbdf`; `order_cycles` times a given event order
(`simulator.cost.cycles.lbdf_cycles`).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numba import njit

from simulator.cost.rows import image_row, row_deps, slot_window
from simulator.workload.graph import ComputeGraph, OpKind

__all__ = ["LbdfTables", "lbdf_tables", "order_cycles", "schedule", "wavefront_steps"]

TIME_SCALE = float(2**40)
"""time * 2**40 + epoch orders rows like (time, epoch) (docs/cost-model.md 4.1, "Events")."""

# columns of `LbdfTables.node`
_H, _R, _W, _ELEMS = 0, 1, 2, 3
# columns of `LbdfTables.op`
(_BLOCKS, _FOLDS, _OUTPUT, _MACS, _WEIGHTS, _TRAFFIC, _OUT_ELEMS, _IN0, _IN1, _SUCC0,
 _SUCC1) = range(11)
# columns of `LbdfTables.slot`
(_NODE, _ROW_ID, _COL_ID, _WHOLE, _PLAIN, _HI_OFF, _LAST_OFF, _READER_OFF, _CLO_OFF,
 _CHI_OFF) = range(10)


def _width(shape: tuple[int, ...], axis: int | None) -> int:
    """Pixels of one row: W of an N,C,H,W tensor streamed by H, else 1 (a token row, a
    vector: one pixel)."""
    return int(shape[3]) if image_row(shape, axis) else 1


class LbdfTables:
    """Flat tables of one graph for `schedule`.

    Attributes:
        n_in: Network inputs (node offset of op 0).
        node: Per node: height, elements of a row, pixels of a row (width), elements.
        op: Per op: blocks (one row made of a multi-row input: global pooling, flatten),
            folds (a global pooling, folding each input row in as it arrives), network output,
            MACs, weight elements, buffer accesses (`simulator.cost.traffic.
            buffer_traffic_elems` of the op alone), output elements; its input slots
            (``slot[op[o, 7]:op[o, 8]]``, slot order) and its distinct consumers
            (``flat[op[o, 9]:op[o, 10]]``).
        slot: Per input slot: the input node; whether output row r reads input row r alone
            for every r (row identity), and likewise its columns (column identity); whether
            it is read whole over several rows (the keys and values of an attention, which
            arrive first when read beside a streamed input); whether it is read *plainly*
            (row for row and column for column by an op of one input that does not block);
            where in ``flat`` its tables start: per output row, the last input row it reads
            (`simulator.cost.rows.RowDeps.hi`); per input row, the last output row reading it
            (`RowDeps.last`, the release of the row schedule) and the same as the pixel
            schedule takes it (the identity for a row-identity read); per output column, the
            first and the last input column it reads.
        flat: The slots' tables and the ops' consumers, end to end.
        args: The tables as `schedule` takes them (after ``buffer_elems``).
    """

    def __init__(self, graph: ComputeGraph) -> None:
        deps = row_deps(graph)
        axes = deps.axes
        n_in = len(graph.input_shapes)
        self.n_in = n_in
        refs = [-(k + 1) for k in range(n_in)][::-1] + [op.id for op in graph]
        node = np.zeros((len(refs), 4), dtype=np.int64)
        for u, r in enumerate(refs):
            shape = graph.tensor_shape(r)
            node[u] = (deps.height_of[r], deps.row_elems_of[r], _width(shape, axes.of[r]),
                       graph.tensor_elems(r))
        self.node = node
        op_tab = np.zeros((len(graph), 11), dtype=np.int64)
        slot: list[tuple] = []
        flat: list[np.ndarray] = []
        at = 0

        def put(values: np.ndarray) -> int:
            nonlocal at
            flat.append(np.asarray(values, dtype=np.int64))
            at += len(values)
            return at - len(values)

        for op in graph:
            o = op.id
            blocks = deps.whole_from_rows(o)
            traffic = sum(graph.tensor_elems(r) for r in op.inputs) + op.weight_reads \
                + op.output_elems
            first_slot = len(slot)
            for i, ref in enumerate(op.inputs):
                lo_r, hi_r, last_r = deps.lo[o][i], deps.hi[o][i], deps.last[o][i]
                h_in = deps.height_of[ref]
                clo, chi = slot_window(op, i, axis=1, axes=axes)
                col_id = len(chi) == node[ref + n_in, _W] \
                    and bool((chi == np.arange(len(chi))).all()) and bool((clo == chi).all())
                row_id = deps.identity[o][i]
                whole = h_in > 1 and int(lo_r[-1]) == 0 and int(hi_r[0]) == h_in - 1
                plain = row_id and col_id and len(op.inputs) == 1 and not blocks
                slot.append((ref + n_in, row_id, col_id, whole, plain, put(hi_r), put(last_r),
                             put(np.arange(len(last_r)) if row_id else last_r), put(clo),
                             put(chi)))
            succ = graph.successors(o)
            first_succ = put(np.array(succ, dtype=np.int64))
            op_tab[o] = (blocks, op.kind is OpKind.GLOBAL_POOL, o in graph.output_set,
                         op.macs, op.weight_reads, traffic, op.output_elems, first_slot,
                         len(slot), first_succ, first_succ + len(succ))
        self.op = op_tab
        self.slot = np.array(slot, dtype=np.int64).reshape(-1, 10)
        self.flat = np.concatenate(flat) if flat else np.zeros(0, np.int64)
        self.args = (n_in, self.node, self.op, self.slot, self.flat)


@lru_cache(maxsize=64)
def lbdf_tables(graph: ComputeGraph) -> LbdfTables:
    """The `LbdfTables` of `graph` (computed once per graph)."""
    return LbdfTables(graph)


# --- helpers ----------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def _lower(a, v):
    """First index i with a[i] >= v (a non-decreasing): `np.searchsorted(a, v, "left")`.
    (Searches that go on from the one before, for a larger v, advance a pointer instead.)"""
    lo, hi = 0, a.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, error_model="numpy")
def _upper(a, v):
    """First index i with a[i] > v (a non-decreasing): `np.searchsorted(a, v, "right")`."""
    lo, hi = 0, a.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, error_model="numpy")
def _before(i, j, key, pace):
    """Whether row i comes before row j in the order (key, pace, row index)."""
    if key[i] != key[j]:
        return key[i] < key[j]
    if pace[i] != pace[j]:
        return pace[i] < pace[j]
    return i < j


@njit(cache=True, error_model="numpy")
def _sort_rows(key, pace):
    """The rows in (key, pace, index) order (`np.lexsort((pace, key))`): a bucket sort on the
    key (buckets in key order: a monotone function of it), each bucket's rows then sorted
    (in order already, in practice)."""
    n = key.shape[0]
    out = np.arange(n)
    if n < 2:
        return out
    tmp = np.empty(n, np.int64)
    lo = hi = key[0]
    for i in range(1, n):
        lo = min(lo, key[i])
        hi = max(hi, key[i])
    if lo == hi:
        _sort_range(out, np.int64(0), n, key, pace, tmp)
        return out
    scale = (n - 1) / (hi - lo)
    end = np.zeros(n + 1, np.int64)
    bucket = np.empty(n, np.int64)
    for i in range(n):
        b = min(int((key[i] - lo) * scale), n - 1)
        bucket[i] = b
        end[b + 1] += 1
    for b in range(n):
        end[b + 1] += end[b]
    for i in range(n):  # (rows in index order within a bucket)
        out[end[bucket[i]]] = i
        end[bucket[i]] += 1
    s = np.int64(0)
    for b in range(n):
        if end[b] - s > 1:
            _sort_range(out, s, end[b], key, pace, tmp)
        s = end[b]
    return out


@njit(cache=True, error_model="numpy")
def _sort_range(a, s, e, key, pace, tmp):
    """Sort a[s:e] by (key, pace, index) in place: by insertion when short, else by merging
    its runs (a natural merge sort; ``tmp``: scratch as long as ``a``)."""
    ordered = True
    for i in range(s + 1, e):
        if _before(a[i], a[i - 1], key, pace):
            ordered = False
            break
    if ordered:
        return
    if e - s <= 16:
        for i in range(s + 1, e):
            x = a[i]
            j = i
            while j > s and _before(x, a[j - 1], key, pace):
                a[j] = a[j - 1]
                j -= 1
            a[j] = x
        return
    starts = np.empty(e - s + 1, np.int64)
    m = 0
    starts[0] = s
    for i in range(s + 1, e):
        if _before(a[i], a[i - 1], key, pace):
            m += 1
            starts[m] = i
    m += 1
    starts[m] = e
    src, dst = a, tmp
    moved = False  # whether the rows are in tmp
    while m > 1:
        k = 0
        for r in range(0, m, 2):
            s0 = starts[r]
            if r + 1 >= m:  # an odd run out: copied
                for i in range(s0, e):
                    dst[i] = src[i]
                starts[k] = s0
                k += 1
                break
            mid, e0 = starts[r + 1], starts[r + 2]
            i, j, t = s0, mid, s0
            while i < mid and j < e0:
                if _before(src[j], src[i], key, pace):
                    dst[t] = src[j]
                    j += 1
                else:
                    dst[t] = src[i]
                    i += 1
                t += 1
            while i < mid:
                dst[t] = src[i]
                i += 1
                t += 1
            while j < e0:
                dst[t] = src[j]
                j += 1
                t += 1
            starts[k] = s0
            k += 1
        starts[k] = e
        m = k
        src, dst = dst, src
        moved = not moved
    if moved:
        for i in range(s, e):
            a[i] = tmp[i]


@njit(cache=True, error_model="numpy")
def wavefront_steps(key, step, a, b):
    """Steps of rows a..b-1 (in place): at least the step given, and one more than the
    previous row's when both share a key (rows released together follow one another)."""
    for r in range(a + 1, b):
        if key[r] == key[r - 1] and step[r] <= step[r - 1]:
            step[r] = step[r - 1] + 1


@njit(cache=True, error_model="numpy")
def _blocks_of(order, key, step, n):
    """Block of every row: the dense rank of its (key, step) in lexicographic order (rows in
    ``order`` are in key order), and the number of blocks."""
    block = np.empty(n, np.int64)
    top = 0
    for i in range(n):
        top = max(top, step[i])
    seen = np.full(top + 1, -1, np.int64)  # per step: the last run it was seen in, its rank
    rank = np.empty(top + 1, np.int64)
    base = 0
    s = 0
    while s < n:
        kv = key[order[s]]
        lo = hi = step[order[s]]
        e = s + 1
        while e < n and key[order[e]] == kv:
            v = step[order[e]]
            lo = min(lo, v)
            hi = max(hi, v)
            e += 1
        if lo == hi:  # one step (most runs)
            for i in range(s, e):
                block[order[i]] = base
            base += 1
            s = e
            continue
        for i in range(s, e):
            seen[step[order[i]]] = s
        for v in range(lo, hi + 1):  # the run's distinct steps, ascending
            if seen[v] == s:
                rank[v] = base
                base += 1
        for i in range(s, e):
            block[order[i]] = rank[step[order[i]]]
        s = e
    return block, base


# --- the group kernel -------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def schedule(ops, pixel, want, buffer_elems, n_in, node, op, slot, flat, d, bw, lat, mpc):
    """The LBDF schedule of the group `ops` (ascending op ids).

    `pixel`: pixel line buffers (else whole rows). `want`: 0 the figures only, 1 also the
    cycles when the line buffers fit ``buffer_elems`` (elements, less the weights), 2 also the
    event order (whatever fits). d, bw, lat, mpc: the hardware's dtype bytes, DRAM bandwidth
    and latency, MACs per cycle.

    Returns (line, rows, wave, cycles, read_elems, write_elems, weight_elems, macs,
    traffic_elems, n_entering, order): ``line`` the line-buffer peak (elements), ``rows`` and
    ``wave`` the whole-row peak and the pixel wavefront's (``wave`` -1 for whole rows),
    ``cycles`` -1 when not timed; the boundary (`simulator.cost.traffic`); with ``want`` 2,
    ``order`` is [nt, n, nl] and the nt tensors (nodes, entering first), then the n events in
    schedule order (their tensors, their rows) and, when the pixel wavefront holds less than
    whole rows, each event's block and each of the nl blocks' levels (else nl = 0); empty
    otherwise (one array, returned whole: an array costs a microsecond to return).
    """
    n_nodes = node.shape[0]
    n_ops = ops.shape[0]
    # --- the tensors of the group: entering (ascending), then the ops
    mark = np.zeros(n_nodes, np.int8)
    for p in range(n_ops):
        if p and ops[p] == ops[p - 1]:
            raise ValueError("a group names an op twice")
        mark[n_in + ops[p]] = 1
    lo_u, hi_u = n_nodes, -1
    for p in range(n_ops):
        o = ops[p]
        for q in range(op[o, _IN0], op[o, _IN1]):
            u = slot[q, _NODE]
            if mark[u] != 1:
                mark[u] = 2
                lo_u = min(lo_u, u)
                hi_u = max(hi_u, u)
    tidx = np.full(n_nodes, -1, np.int64)
    n_ent = np.int64(0)  # (typed: literals would compile the callees twice)
    for u in range(lo_u, hi_u + 1):
        if mark[u] == 2:
            n_ent += 1
    nt = n_ent + n_ops
    nodes = np.empty(nt, np.int64)
    k = 0
    for u in range(lo_u, hi_u + 1):
        if mark[u] == 2:
            nodes[k] = u
            tidx[u] = k
            k += 1
    for p in range(n_ops):
        nodes[n_ent + p] = n_in + ops[p]
        tidx[n_in + ops[p]] = n_ent + p
    H = np.empty(nt, np.int64)
    R = np.empty(nt, np.int64)
    W = np.empty(nt, np.int64)
    offs = np.empty(nt + 1, np.int64)
    coffs = np.empty(nt + 1, np.int64)
    offs[0] = 0
    coffs[0] = 0
    for k in range(nt):
        u = nodes[k]
        H[k] = node[u, _H]
        R[k] = node[u, _R]
        W[k] = node[u, _W]
        offs[k + 1] = offs[k] + H[k]
        coffs[k + 1] = coffs[k] + W[k]
    n = offs[nt]
    # --- the boundary (simulator.cost.traffic) and the leaving tensors
    read_elems = 0
    for k in range(n_ent):
        read_elems += node[nodes[k], _ELEMS]
    weight_elems = macs = traffic = write_elems = 0
    leaves = np.zeros(nt, np.bool_)
    readers = np.zeros(nt, np.bool_)
    for p in range(n_ops):
        o = ops[p]
        weight_elems += op[o, _WEIGHTS]
        macs += op[o, _MACS]
        traffic += op[o, _TRAFFIC]
        out = op[o, _OUTPUT] != 0
        if not out:
            for s in range(op[o, _SUCC0], op[o, _SUCC1]):
                if mark[n_in + flat[s]] != 1:
                    out = True
                    break
        if out:
            leaves[n_ent + p] = True
            write_elems += op[o, _OUT_ELEMS]
        for q in range(op[o, _IN0], op[o, _IN1]):
            readers[tidx[slot[q, _NODE]]] = True
    # --- entering tensors read only whole beside a streamed input arrive first (_preloaded)
    first = np.zeros(max(n_ent, 1), np.bool_)
    if n_ent:
        whole = np.ones(n_ent, np.bool_)
        beside = np.zeros(n_ent, np.bool_)
        for p in range(n_ops):
            o = ops[p]
            streams = False
            for q in range(op[o, _IN0], op[o, _IN1]):
                if slot[q, _WHOLE] == 0 and node[slot[q, _NODE], _H] > 1:
                    streams = True
            for q in range(op[o, _IN0], op[o, _IN1]):
                k = tidx[slot[q, _NODE]]
                if k < n_ent and H[k] > 1:
                    w = slot[q, _WHOLE] != 0
                    whole[k] = whole[k] and w
                    if streams and w:
                        beside[k] = True
        for k in range(n_ent):
            first[k] = beside[k] and whole[k]
    # --- row keys (time * 2**40 + epoch), paces, steps; column phases and orders
    h_ref = np.int64(1)
    for k in range(n_ent):
        if k == 0 or H[k] > h_ref:
            h_ref = H[k]
    key = np.empty(n, np.float64)
    pace = np.zeros(n, np.float64)
    step = np.zeros(n, np.int64)
    nc = coffs[nt] if pixel else 0
    phase = np.zeros(nc, np.float64)
    order = np.zeros(nc, np.float64)
    for k in range(n_ent):
        a, h = offs[k], H[k]
        for j in range(h):
            key[a + j] = (j / h) * TIME_SCALE
            if first[k]:
                key[a + j] = key[a + j] - TIME_SCALE
        if pixel:
            c0, w = coffs[k], W[k]
            for c in range(w):
                phase[c0 + c] = float(c * h_ref) / float(w * h)
    for p in range(n_ops):
        o = ops[p]
        j = n_ent + p
        a, h, q0, q1 = offs[j], H[j], op[o, _IN0], op[o, _IN1]
        blocks = op[o, _BLOCKS] != 0
        c0, w = coffs[j], W[j]
        if q1 - q0 == 1:
            k = tidx[slot[q0, _NODE]]
            b = offs[k]
            if slot[q0, _ROW_ID]:  # its input's rows one to one
                for r in range(h):
                    key[a + r] = key[b + r]
                    step[a + r] = step[b + r]
                    pace[a + r] = pace[b + r] if k >= n_ent else r / h
            else:
                ho = slot[q0, _HI_OFF]
                for r in range(h):
                    key[a + r] = key[b + flat[ho + r]]
                if not blocks:
                    for r in range(h):
                        src = b + flat[ho + r]
                        pace[a + r] = max(r / h, pace[src])
                        step[a + r] = step[src]
                    wavefront_steps(key, step, a, a + h)
            if blocks:
                _epoch(key, a, h, phase, order, c0, w, pixel)
            elif pixel:
                kc, ko = coffs[k], slot[q0, _CHI_OFF]
                if slot[q0, _COL_ID]:
                    for c in range(w):
                        phase[c0 + c] = phase[kc + c]
                        order[c0 + c] = order[kc + c] if k >= n_ent else c / w
                else:
                    for c in range(w):
                        src = kc + flat[ko + c]
                        phase[c0 + c] = phase[src]
                        order[c0 + c] = max(c / w, order[src])
            continue
        for r in range(h):  # several inputs: the latest of the rows it waits for
            best = -np.inf
            for q in range(q0, q1):
                v = key[offs[tidx[slot[q, _NODE]]] + flat[slot[q, _HI_OFF] + r]]
                if v > best:
                    best = v
            key[a + r] = best
        if blocks:
            _epoch(key, a, h, phase, order, c0, w, pixel)
            continue
        n_bound = np.int64(0)
        for r in range(h):
            pace[a + r] = r / h
        for q in range(q0, q1):
            b, ho = offs[tidx[slot[q, _NODE]]], slot[q, _HI_OFF]
            waits = False
            for r in range(h):
                src = b + flat[ho + r]
                if key[src] == key[a + r]:
                    waits = True
                    if pace[src] > pace[a + r]:
                        pace[a + r] = pace[src]
                    if step[src] > step[a + r]:
                        step[a + r] = step[src]
            if waits:
                n_bound += 1
        wavefront_steps(key, step, a, a + h)
        if pixel:
            _columns(key, offs, tidx, slot, flat, q0, q1, a, h, phase, order, coffs, c0, w,
                     n_bound)
    # --- the order of the row schedule, and the whole-row peak
    srt = _sort_rows(key, pace)
    rank = np.empty(n, np.int64)
    for i in range(n):
        rank[srt[i]] = i
    tensor = np.empty(n, np.int64)
    for k in range(nt):
        for i in range(offs[k], offs[k + 1]):
            tensor[i] = k
    rows_of = _READER_OFF if pixel else _LAST_OFF
    start = rank.copy()
    end = rank.copy()
    for p in range(n_ops):
        o = ops[p]
        c0 = offs[n_ent + p]
        fold = op[o, _FOLDS] != 0
        for q in range(op[o, _IN0], op[o, _IN1]):
            k = tidx[slot[q, _NODE]]
            b = offs[k]
            if fold:  # each input row is folded in as it arrives
                if rank[b] < start[c0]:
                    start[c0] = rank[b]
                continue
            lo_ = slot[q, rows_of]
            for i in range(H[k]):
                e = rank[c0 + flat[lo_ + i]]
                if e > end[b + i]:
                    end[b + i] = e
    for k in range(n_ent):  # one row in flight ahead of use
        for i in range(offs[k + 1] - 1, offs[k], -1):
            start[i] = rank[i - 1]
    for k in range(n_ent, nt):  # a leaving row is held until its successor is produced
        if leaves[k]:
            for i in range(offs[k], offs[k + 1] - 1):
                if rank[i + 1] - 1 > end[i]:
                    end[i] = rank[i + 1] - 1
            end[offs[k + 1] - 1] = n - 1
    diff = np.zeros(n + 1, np.int64)
    for i in range(n):
        e = max(end[i], start[i])
        diff[start[i]] += R[tensor[i]]
        diff[e + 1] -= R[tensor[i]]
    rows = 0
    acc = 0
    for i in range(n + 1):
        acc += diff[i]
        if acc > rows:
            rows = acc
    line = rows
    wave = -1
    row_block = np.zeros(0, np.int64)
    levels = np.zeros(0, np.int64)
    nb = np.int64(0)
    if pixel:
        row_block, nb = _blocks_of(srt, key, step, n)
        levels = _levels(n_ent, nt, n, nb, H, R, W, offs, coffs, tensor, ops, op, slot, flat,
                         tidx, leaves, readers, row_block, phase, order, h_ref)
        wave = 0
        for b in range(nb):
            if levels[b] > wave:
                wave = levels[b]
        if wave < line:
            line = wave
    # --- the event order and the cycles
    cycles = -1
    room = buffer_elems - weight_elems
    ev_tensor = np.zeros(0, np.int64)
    ev_row = np.zeros(0, np.int64)
    ev_block = np.zeros(0, np.int64)
    if want == 2 or (want == 1 and line <= room):
        by_block = pixel and wave < rows
        if by_block:  # blocks in order, each block's rows in the row schedule's order
            count = np.zeros(nb + 1, np.int64)
            for i in range(n):
                count[row_block[i] + 1] += 1
            for b in range(nb):
                count[b + 1] += count[b]
            ev = np.empty(n, np.int64)
            for t in range(n):
                i = srt[t]
                ev[count[row_block[i]]] = i
                count[row_block[i]] += 1
        else:
            ev = srt
            levels = np.zeros(0, np.int64)
        ev_tensor = np.empty(n, np.int64)
        ev_row = np.empty(n, np.int64)
        for t in range(n):
            i = ev[t]
            ev_tensor[t] = tensor[i]
            ev_row[t] = i - offs[tensor[i]]
        if by_block:
            ev_block = np.empty(n, np.int64)
            for t in range(n):
                ev_block[t] = row_block[ev[t]]
        if want == 1:
            comp = np.zeros(nt, np.int64)
            wt = np.zeros(nt, np.int64)
            for p in range(n_ops):
                o = ops[p]
                comp[n_ent + p] = -(-(op[o, _MACS] // H[n_ent + p]) // mpc)
                wt[n_ent + p] = op[o, _WEIGHTS]
            cycles = order_cycles(ev_tensor, ev_row, H, R, n_ent, leaves, comp, wt, d, bw,
                                  lat)
    elif not pixel or wave >= rows:
        levels = np.zeros(0, np.int64)
    if want != 2:
        return (line, rows, wave, cycles, read_elems, write_elems, weight_elems, macs,
                traffic, n_ent, np.zeros(0, np.int64))
    nl = levels.shape[0]  # [nt, n, blocks] + the tensors' nodes, the events' tensors, rows,
    packed = np.empty(3 + nt + 2 * n + ev_block.shape[0] + nl, np.int64)  # blocks, levels
    packed[0], packed[1], packed[2] = nt, n, nl
    at = 3
    for part in (nodes, ev_tensor, ev_row, ev_block, levels):
        packed[at:at + part.shape[0]] = part
        at += part.shape[0]
    return (line, rows, wave, cycles, read_elems, write_elems, weight_elems, macs, traffic,
            n_ent, packed)


@njit(cache=True, error_model="numpy")
def _epoch(key, a, h, phase, order, c0, w, pixel):
    """A blocking op starts a new epoch: its rows wait for nothing of this one."""
    for r in range(h):
        key[a + r] = key[a + r] + 1.0
    if pixel:
        for c in range(w):
            phase[c0 + c] = 0.0
            order[c0 + c] = c / w


@njit(cache=True, error_model="numpy")
def _columns(key, offs, tidx, slot, flat, q0, q1, a, h, phase, order, coffs, c0, w, n_bound):
    """Phase and order of each column of an op of several inputs: column c waits for the last
    column its window reads of every input it waits for (the latest of their phases); among
    columns of one phase, the larger of its own fraction of its row and its inputs' orders,
    carried forward along the row."""
    seen = 0
    for q in range(q0, q1):
        b, ho = offs[tidx[slot[q, _NODE]]], slot[q, _HI_OFF]
        waits = False
        for r in range(h):
            if key[b + flat[ho + r]] == key[a + r]:
                waits = True
                break
        if not waits:
            continue
        kc, ko = coffs[tidx[slot[q, _NODE]]], slot[q, _CHI_OFF]
        for c in range(w):
            src = kc + flat[ko + c]
            if seen == 0:
                phase[c0 + c] = phase[src]
            elif phase[src] > phase[c0 + c]:
                phase[c0 + c] = phase[src]
        seen += 1
    for c in range(w):
        order[c0 + c] = c / w
    for q in range(q0, q1):
        b, ho = offs[tidx[slot[q, _NODE]]], slot[q, _HI_OFF]
        waits = False
        for r in range(h):
            if key[b + flat[ho + r]] == key[a + r]:
                waits = True
                break
        if not waits:
            continue
        kc, ko = coffs[tidx[slot[q, _NODE]]], slot[q, _CHI_OFF]
        for c in range(w):
            src = kc + flat[ko + c]
            if n_bound == 1 or phase[src] == phase[c0 + c]:
                if order[src] > order[c0 + c]:
                    order[c0 + c] = order[src]
    if n_bound > 1:  # the running maximum of the order within each run of one phase
        for c in range(1, w):
            if phase[c0 + c] == phase[c0 + c - 1] and order[c0 + c] < order[c0 + c - 1]:
                order[c0 + c] = order[c0 + c - 1]


# --- pixel levels -----------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def _levels(n_ent, nt, n, nb, H, R, W, offs, coffs, tensor, ops, op, slot, flat, tidx, leaves,
            readers, rb, raw, order, h_ref):
    """Per block: what the pixel line buffers hold (at most) while the block streams
    (docs/cost-model.md 4.1, "Pixel granularity")."""
    n_ops = ops.shape[0]
    bstart = rb.copy()
    bend = rb.copy()
    for p in range(n_ops):  # a row lives to its last reader's block
        o = ops[p]
        c0 = offs[n_ent + p]
        fold = op[o, _FOLDS] != 0
        for q in range(op[o, _IN0], op[o, _IN1]):
            k = tidx[slot[q, _NODE]]
            b = offs[k]
            if fold:  # a running sum, from its input's row 0 on
                if rb[b] < bstart[c0]:
                    bstart[c0] = rb[b]
                continue
            lo_ = slot[q, _READER_OFF]
            for i in range(H[k]):
                e = rb[c0 + flat[lo_ + i]]
                if e > bend[b + i]:
                    bend[b + i] = e
    pixel = np.empty(nt, np.int64)
    keep = np.ones(nt, np.bool_)  # a lone tensor (leaving, read by no op of the group) holds
    for k in range(nt):  # only its newest pixel, being written: its rows are not kept
        pixel[k] = R[k] // W[k]
        if leaves[k] and not readers[k]:
            keep[k] = False
    born = np.zeros(nb + 1, np.int64)
    live = np.zeros(nb + 1, np.int64)
    for i in range(n):
        if keep[tensor[i]]:
            born[bstart[i]] += R[tensor[i]]
            live[bend[i] + 1] -= R[tensor[i]]
    acc = 0
    for b in range(nb + 1):
        acc += born[b] + live[b]
        live[b] = acc
    # per row: the oldest live row of its tensor when it is made, whether that is read out in
    # the block making it (steady), and the running maximum of the blocks its tensor's rows
    # live to (reach)
    reach = np.empty(n, np.int64)
    for k in range(nt):
        top = -1
        for i in range(offs[k], offs[k + 1]):
            if bend[i] > top:
                top = bend[i]
            reach[i] = top
    plain = _plain(ops, op, slot, tidx, nt)
    steady_dev = _steady_columns(n_ent, nt, W, coffs, ops, op, slot, flat, tidx, raw, order,
                                 h_ref, plain)
    for k in range(nt):
        if steady_dev[k] > W[k]:
            steady_dev[k] = W[k]
    steady = np.zeros(n, np.bool_)
    level = live.copy()
    for k in range(nt):
        a, e = offs[k], offs[k + 1]
        lo = a  # the first row m of the tensor with reach[m] >= bstart[i] (both rise along
        for i in range(a, e):  # the tensor: the search goes on from the row before)
            if i == a or bstart[i] < bstart[i - 1]:
                lo, hi_ = a, i + 1
                while lo < hi_:
                    mid = (lo + hi_) >> 1
                    if reach[mid] < bstart[i]:
                        lo = mid + 1
                    else:
                        hi_ = mid
            else:
                while reach[lo] < bstart[i]:
                    lo += 1
            if keep[k] and bend[lo] == bstart[i]:
                steady[i] = True
                level[bstart[i]] -= R[k] - steady_dev[k] * pixel[k]
    extra = _pixels_in_transit(n_ent, nt, nb, H, W, offs, bstart, bend, leaves, keep, pixel)
    total = np.empty(nb, np.int64)
    peak = 0
    for b in range(nb):
        total[b] = level[b] + extra[b]
        if b == 0 or total[b] > peak:
            peak = total[b]
    one_height = True
    h_one = -1
    for k in range(n_ent):
        if H[k] > 1:
            if h_one >= 0 and H[k] != h_one:
                one_height = False
            h_one = H[k]
    grows_at_peak = False
    for i in range(n):
        if keep[tensor[i]] and not steady[i] and total[bstart[i]] >= peak:
            grows_at_peak = True
            break
    if not one_height or not grows_at_peak:
        return total  # nothing grows at the peak: no trade
    # rows read out: the oldest live row of its tensor at the block of its last reader
    read_out = np.zeros(n, np.bool_)
    shrinking = np.zeros(n, np.bool_)
    n_grow = np.zeros(nb, np.int64)
    n_shrink = np.zeros(nb, np.int64)
    for k in range(nt):
        a, e = offs[k], offs[k + 1]
        for i in range(a, e):
            prior = reach[i - 1] if i > a else -1
            if not keep[k]:
                continue
            if not steady[i]:
                n_grow[bstart[i]] += 1
            if prior < bend[i]:
                read_out[i] = True
                lo, hi_ = a, e  # is a row of the tensor born where it is read out?
                while lo < hi_:
                    mid = (lo + hi_) >> 1
                    if bstart[mid] < bend[i]:
                        lo = mid + 1
                    else:
                        hi_ = mid
                if not (lo < e and bstart[lo] == bend[i]):
                    shrinking[i] = True
                    n_shrink[bend[i]] += 1
    trade = False
    for b in range(nb):
        if total[b] >= peak and n_grow[b] * n_shrink[b] > 0:
            trade = True
            break
    if not trade:
        return total  # no tensor grows while another shrinks at the peak
    # a tensor growing while another shrinks: the larger of the rows at the block's start and
    # end, plus how far each tensor's pixels stray from the line between them. The block's
    # progress is the phase, or, in a block whose rows all have one phase (released together,
    # e.g. after a global pooling), the order
    by = _single_phase_blocks(nt, n, nb, coffs, tensor, rb, raw)
    lag_min, shrink = _deviations(n_ent, nt, W, coffs, ops, op, slot, flat, tidx, raw, order,
                                  plain)
    grow_dev = np.empty((2, nt), np.int64)
    shrink_dev = np.empty((2, nt), np.int64)
    for m in range(2):
        for k in range(nt):
            g = 1.0 - lag_min[m, k]
            grow_dev[m, k] = int(min(max(g, 0.0), float(W[k])))
            s = math.ceil(shrink[m, k] - 1e-9)
            shrink_dev[m, k] = int(min(max(s, 0.0), float(W[k])))
    dev = np.zeros(nb + 1, np.int64)
    gone = np.zeros(nb + 1, np.int64)
    for i in range(n):
        k = tensor[i]
        px = pixel[k]
        if steady[i]:
            dev[bstart[i]] += steady_dev[k] * px
        elif keep[k]:
            dev[bstart[i]] += grow_dev[by[bstart[i]], k] * px
        if shrinking[i]:
            dev[bend[i]] += shrink_dev[by[bend[i]], k] * px
        if read_out[i]:
            gone[bend[i]] += R[k]
    out = np.empty(nb, np.int64)
    for b in range(nb):
        before = live[b] - born[b]
        after = live[b] - gone[b]
        linear = max(before, after) + dev[b]
        out[b] = min(level[b], linear) + extra[b]
    return out


@njit(cache=True, error_model="numpy")
def _pixels_in_transit(n_ent, nt, nb, H, W, offs, bstart, bend, leaves, keep, pixel):
    """Per block: the pixel in flight of each entering tensor of more than one pixel (from
    its first row's block to its last's), and the newest pixel of each leaving tensor while
    none of its rows is live (its DRAM write in flight; the last one until the group ends)."""
    diff = np.zeros(nb + 1, np.int64)
    for k in range(n_ent):
        if H[k] * W[k] > 1:
            diff[bstart[offs[k]]] += pixel[k]
            diff[bstart[offs[k + 1] - 1] + 1] -= pixel[k]
    for k in range(n_ent, nt):
        if leaves[k] and not keep[k]:
            diff[bstart[offs[k]]] += pixel[k]
            diff[nb] -= pixel[k]
    extra = np.empty(nb, np.int64)
    acc = 0
    for b in range(nb):
        acc += diff[b]
        extra[b] = acc
    live = np.zeros(nb + 1, np.int64)
    for k in range(n_ent, nt):  # leaving tensors some op of the group reads too
        if not leaves[k] or not keep[k]:
            continue
        live[:] = 0
        for i in range(offs[k], offs[k + 1]):
            live[bstart[i]] += 1
            live[bend[i] + 1] -= 1
        acc = 0
        f = bstart[offs[k]]
        for b in range(nb):
            acc += live[b]
            if b >= f and acc == 0:
                extra[b] += pixel[k]
    return extra


@njit(cache=True, error_model="numpy")
def _plain(ops, op, slot, tidx, nt):
    """Per tensor, whether some op of the group reads it plainly (row for row and column
    for column, one input); global poolings fold their input in and read nothing."""
    plain = np.zeros(nt, np.bool_)
    for p in range(ops.shape[0]):
        o = ops[p]
        if op[o, _FOLDS]:
            continue
        for q in range(op[o, _IN0], op[o, _IN1]):
            if slot[q, _PLAIN]:
                plain[tidx[slot[q, _NODE]]] = True
    return plain


@njit(cache=True, error_model="numpy")
def _steady_columns(n_ent, nt, W, coffs, ops, op, slot, flat, tidx, raw, order, h_ref, plain):
    """Per tensor: the most pixels its interval spans beyond whole rows (at least 1).

    The columns of every tensor are laid end to end with phases offset per tensor (so they
    rise across tensors), with the run of equal phase of each column, and run + order (which
    rises too). For tensor k read by op o, when o computes column c the producer of k has
    produced every column whose (phase, order) comes first; k's interval then reaches from o's
    window's first column to the last of those. A *plain* reader has k's phases and orders:
    k's columns of equal phase and order come first (the longest such run)."""
    nc = coffs[nt]
    span = 2 * (h_ref + 1)
    gphase = np.empty(nc, np.float64)
    grun = np.empty(nc, np.int64)
    gkey = np.empty(nc, np.float64)
    for k in range(nt):
        off = float(k * span)
        for c in range(coffs[k], coffs[k + 1]):
            gphase[c] = raw[c] + off
    for c in range(nc):
        grun[c] = 0 if c == 0 else grun[c - 1] + (gphase[c] != gphase[c - 1])
        gkey[c] = grun[c] + order[c]
    steady = np.zeros(nt, np.int64)
    if plain.any():
        # the longest run of one key (run + order) among the runs from the tensor's first
        # column's to the next tensor's first column's (`np.maximum.reduceat`)
        run2 = np.empty(nc, np.int64)
        for c in range(nc):
            run2[c] = 0 if c == 0 else run2[c - 1] + (gkey[c] != gkey[c - 1])
        length = np.zeros(run2[nc - 1] + 1, np.int64)
        for c in range(nc):
            length[run2[c]] += 1
        for k in range(nt):
            if not plain[k]:
                continue
            a = run2[coffs[k]]
            e = run2[coffs[k + 1]] if k + 1 < nt else length.shape[0]
            best = length[a]
            for x in range(a + 1, e):
                if length[x] > best:
                    best = length[x]
            steady[k] = best
    for p in range(ops.shape[0]):  # any other read
        o = ops[p]
        if op[o, _FOLDS]:
            continue
        j = n_ent + p
        for q in range(op[o, _IN0], op[o, _IN1]):
            if slot[q, _PLAIN]:
                continue
            k = tidx[slot[q, _NODE]]
            off = float(k * span)
            last_col = coffs[k + 1] - 1
            ko = slot[q, _CLO_OFF]
            first = later = 0
            prev_x = prev_y = np.inf
            for c in range(W[j]):  # (the reader's phases rise along its row: a search goes
                at_x = raw[coffs[j] + c] + off  # on from the one before)
                if at_x >= prev_x:
                    while first < nc and gphase[first] < at_x:
                        first += 1
                else:
                    first = _lower(gphase, at_x)
                prev_x = at_x
                at = min(first, last_col)
                y = grun[at] + order[coffs[j] + c]
                if y >= prev_y:
                    while later < nc and gkey[later] <= y:
                        later += 1
                else:
                    later = _upper(gkey, y)
                prev_y = y
                produced = (later if gphase[at] == at_x else first) - coffs[k]
                if produced - flat[ko + c] > steady[k]:
                    steady[k] = produced - flat[ko + c]
    for k in range(nt):
        if steady[k] < 1:
            steady[k] = 1
    return steady


@njit(cache=True, error_model="numpy")
def _deviations(n_ent, nt, W, coffs, ops, op, slot, flat, tidx, raw, order, plain):
    """Per progress measure (0: the phase, 1: the order) and tensor: minus how many columns
    it runs ahead of the progress at most (``lag_min``), and how many columns its readers'
    windows trail the progress at most (``shrink``; a plain reader's trail is the tensor's
    own lag)."""
    lag_min = np.empty((2, nt), np.float64)
    shrink = np.zeros((2, nt), np.float64)
    for k in range(nt):
        fw = float(W[k])
        for m in range(2):
            lo_, hi_ = np.inf, -np.inf
            for c in range(W[k]):
                v = (raw[coffs[k] + c] if m == 0 else order[coffs[k] + c]) * fw - c
                lo_ = min(lo_, v)
                hi_ = max(hi_, v)
            lag_min[m, k] = math.ceil(lo_ - 1e-9)
            if plain[k] and hi_ > shrink[m, k]:
                shrink[m, k] = hi_
    for p in range(ops.shape[0]):  # any other read: its window's first column
        o = ops[p]
        if op[o, _FOLDS]:
            continue
        j = n_ent + p
        for q in range(op[o, _IN0], op[o, _IN1]):
            if slot[q, _PLAIN]:
                continue
            k = tidx[slot[q, _NODE]]
            fw = float(W[k])
            ko = slot[q, _CLO_OFF]
            for c in range(W[j]):
                lo = flat[ko + c]
                v = fw * raw[coffs[j] + c] - lo
                if v > shrink[0, k]:
                    shrink[0, k] = v
                v = fw * order[coffs[j] + c] - lo
                if v > shrink[1, k]:
                    shrink[1, k] = v
    return lag_min, shrink


@njit(cache=True, error_model="numpy")
def _single_phase_blocks(nt, n, nb, coffs, tensor, rb, raw):
    """Per block, 1 when its rows are all of tensors of one and the same phase in every
    column (its progress is then the order), else 0 (the phase)."""
    lowest = np.empty(nt, np.float64)
    flat = np.empty(nt, np.bool_)
    for k in range(nt):
        lo, hi_ = np.inf, -np.inf
        for c in range(coffs[k], coffs[k + 1]):
            lo = min(lo, raw[c])
            hi_ = max(hi_, raw[c])
        lowest[k] = lo
        flat[k] = lo == hi_
    mixed = np.zeros(nb, np.bool_)
    low = np.full(nb, np.inf)
    high = np.full(nb, -np.inf)
    for i in range(n):
        b, k = rb[i], tensor[i]
        if not flat[k]:
            mixed[b] = True
        low[b] = min(low[b], lowest[k])
        high[b] = max(high[b], lowest[k])
    by = np.empty(nb, np.int64)
    for b in range(nb):
        by[b] = 1 if (not mixed[b] and low[b] == high[b]) else 0
    return by


# --- cycles -----------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def order_cycles(ev_tensor, ev_row, H, R, n_ent, leaves, comp, weights, d, bw, lat):
    """Cycles of an LBDF group run in the event order (``ev_tensor``, ``ev_row``): weights
    first, then one row in flight per entering tensor and one write in flight per leaving
    tensor; the PE array computes op rows in order (`simulator.cost.cycles.lbdf_cycles`).
    Per tensor: H rows of R elements; ``comp`` the PE cycles of one row, ``weights`` the
    weight elements (ops)."""
    nt = H.shape[0]
    xfer = np.empty(nt, np.int64)
    for k in range(nt):
        xfer[k] = math.ceil(R[k] * d / bw)
    weights_ready = np.zeros(nt, np.int64)
    channel = 0  # the cycle the channel is free
    for k in range(n_ent, nt):  # every weight tensor first, in op order
        if weights[k]:
            channel += math.ceil(weights[k] * d / bw)
            weights_ready[k] = channel + lat
    ready = np.zeros(nt, np.int64)  # entering: next row usable; leaving: last write lands
    for k in range(n_ent):  # then row 0 of every entering tensor
        channel += xfer[k]
        ready[k] = channel + lat
    now = 0
    for t in range(ev_tensor.shape[0]):
        k, j = ev_tensor[t], ev_row[t]
        if k < n_ent:  # an entering row: wait for it, then request the next one
            if ready[k] > now:
                now = ready[k]
            if j + 1 < H[k]:
                channel = (now if now > channel else channel) + xfer[k]
                ready[k] = channel + lat
        else:
            if weights_ready[k] > now:
                now = weights_ready[k]
            if leaves[k]:  # one write in flight: row j - 1 must have landed
                if j and ready[k] > now:
                    now = ready[k]
                now += comp[k]
                channel = (now if now > channel else channel) + xfer[k]
                ready[k] = channel + lat
            else:
                now += comp[k]
    for k in range(n_ent, nt):
        if leaves[k] and ready[k] > now:
            now = ready[k]
    return now

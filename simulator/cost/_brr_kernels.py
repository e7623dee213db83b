"""Compiled kernels of the BRR cost model (`simulator.cost.brr`): a group's layout, its tile
regions and what every op position holds, over flat per-graph tables.

The model's semantics live in `simulator.cost.brr` (and docs/cost-model.md, section 4); these
functions compute the same integers with numba over int64 arrays instead of numpy calls per
op, so costing a group is a few compiled calls. A tensor is a *node* ``u``: a network input
``-k - 1`` is node ``n_in - k - 1``, op ``o`` is node ``n_in + o``, so ascending nodes are
ascending references (network inputs first), the order of `ComputeGraph.inputs_of`.

`GraphTables` holds the flat tables of one graph (built once per graph, `graph_tables`).
"""

from __future__ import annotations

import math
from functools import cached_property, lru_cache

import numpy as np
from numba import njit

from simulator.workload.graph import ComputeGraph, OpKind

__all__ = ["GraphTables", "bands", "block_summaries", "cycles", "graph_tables", "layout",
           "least_rows", "live", "window_tables"]


class GraphTables:
    """Flat int64 tables of one graph for the kernels.

    Attributes:
        n_in: Network inputs (node offset of op 0).
        height, row_elems: Per node.
        in_ptr, in_node: CSR of every op's inputs, slot order (``in_node[in_ptr[o]:in_ptr[o+1]]``).
        tab_off, tab_len: Per input slot, offset and length of its padded lo/hi tables.
        lo, hi: The padded row tables (`simulator.cost.rows.RowDeps.lo_pad`, ``hi_pad``).
        succ_ptr, succ: CSR of every op's distinct consumers, ascending.
        output: 1 where an op's tensor is a network output.
        pool: 1 for a global pooling.
        macs, weights: Per op.
    """

    def __init__(self, graph: ComputeGraph, deps) -> None:
        n_in = len(graph.input_shapes)
        self.n_in = n_in
        refs = [-(k + 1) for k in range(n_in)][::-1] + [op.id for op in graph]
        self.height = np.array([deps.height_of[r] for r in refs], dtype=np.int64)
        self.row_elems = np.array([deps.row_elems_of[r] for r in refs], dtype=np.int64)
        in_ptr, in_node, off, ln, lo, hi = [0], [], [], [], [], []
        at = 0
        for op in graph:
            for ref, lp, hp in zip(op.inputs, deps.lo_pad[op.id], deps.hi_pad[op.id],
                                   strict=True):
                in_node.append(ref + n_in)
                off.append(at)
                ln.append(len(lp))
                lo.append(lp)
                hi.append(hp)
                at += len(lp)
            in_ptr.append(len(in_node))
        self.in_ptr = np.array(in_ptr, dtype=np.int64)
        self.in_node = np.array(in_node, dtype=np.int64)
        self.tab_off = np.array(off, dtype=np.int64)
        self.tab_len = np.array(ln, dtype=np.int64)
        self.lo = np.concatenate(lo).astype(np.int64) if lo else np.zeros(0, np.int64)
        self.hi = np.concatenate(hi).astype(np.int64) if hi else np.zeros(0, np.int64)
        succ_ptr, succ = [0], []
        for op in graph:
            succ.extend(graph.successors(op.id))
            succ_ptr.append(len(succ))
        self.succ_ptr = np.array(succ_ptr, dtype=np.int64)
        self.succ = np.array(succ, dtype=np.int64)
        self.output = np.zeros(len(graph), dtype=np.int64)
        self.output[list(graph.output_set)] = 1
        self.pool = np.array([op.kind is OpKind.GLOBAL_POOL for op in graph], dtype=np.int64)
        self.macs = np.array([op.macs for op in graph], dtype=np.int64)
        self.weights = np.array([op.weight_reads for op in graph], dtype=np.int64)
        self._graph = graph

    @cached_property
    def weight_arrays(self) -> tuple[np.ndarray, ...]:
        """Per op (zeros for an op without weights): output channels, elements of the first
        one-output-channel slice, input channels if it can be input-sliced (else 0), elements
        of the first one-input-channel slice, elements of one channel of one row of its input,
        and the node of its first input (`brr._weight_info`)."""
        from simulator.cost.brr import _weight_info

        info, _ = _weight_info(self._graph)
        n = len(self._graph)
        cols = [np.zeros(n, dtype=np.int64) for _ in range(6)]
        for o, (_, c_out, first_out, chans, first_in, x_chan) in info.items():
            for col, v in zip(cols, (c_out, first_out, chans, first_in, x_chan,
                                     self._graph[o].inputs[0] + self.n_in), strict=True):
                col[o] = v
        return tuple(cols)

    @cached_property
    def whole_from_rows(self) -> np.ndarray:
        """True for an op that reads a whole feature map into one row (a global pooling)."""
        from simulator.cost.rows import row_deps

        deps = row_deps(self._graph)
        return np.array([deps.whole_from_rows(op.id) for op in self._graph], dtype=bool)

    @cached_property
    def op_traffic(self) -> np.ndarray:
        """Per op, the buffer accesses of `simulator.cost.traffic.buffer_traffic_elems`."""
        g = self._graph
        return np.array([sum(g.tensor_elems(r) for r in op.inputs) + op.weight_reads
                         + op.output_elems for op in g], dtype=np.int64)

    @cached_property
    def output_elems(self) -> np.ndarray:
        """Per op, the elements of its tensor."""
        return np.array([op.output_elems for op in self._graph], dtype=np.int64)

    @cached_property
    def win(self) -> np.ndarray:
        """The window tables of every input slot (`window_tables`), built on first use."""
        return window_tables(self.tab_off, self.tab_len, self.lo, self.hi)

    @cached_property
    def useful(self) -> np.ndarray:
        """1 for an op from which a network output is reachable (`brr._useful`)."""
        from simulator.cost.brr import _useful

        out = np.zeros(len(self._graph), dtype=np.int64)
        out[list(_useful(self._graph))] = 1
        return out


@lru_cache(maxsize=8)
def graph_tables(graph: ComputeGraph) -> GraphTables:
    """The `GraphTables` of `graph` (computed once per graph)."""
    from simulator.cost.rows import row_deps

    return GraphTables(graph, row_deps(graph))


@njit(cache=True)
def layout(ops, n_in, in_ptr, in_node, succ_ptr, succ, output, pool, height, row_elems):
    """The tensors of the group `ops` (ascending op ids) and their lifetimes.

    Returns (nodes, n_entering, leaving, born, dies, allowance): ``nodes`` the entering
    tensors (ascending) then the ops, as nodes; ``leaving`` the rows (indices in ``nodes``) of
    the ops whose tensor leaves the group, ascending; ``born``/``dies`` the first and last op
    position at which a tile holds each tensor (`simulator.cost.brr._lifetimes`); the row
    allowance (one row per entering and per leaving tensor of more than one row)."""
    n_ops = ops.shape[0]
    total = height.shape[0]
    pos = np.full(total, -1, np.int64)  # node -> op position in the group
    for p in range(n_ops):
        pos[ops[p] + n_in] = p
    first_reader = np.full(total, -1, np.int64)
    last_reader = np.full(total, -1, np.int64)
    entering = np.zeros(total, np.bool_)
    for p in range(n_ops):
        o = ops[p]
        for q in range(in_ptr[o], in_ptr[o + 1]):
            u = in_node[q]
            if pos[u] < 0:
                entering[u] = True
                if first_reader[u] < 0:
                    first_reader[u] = p
                last_reader[u] = p
    n_ent = 0
    for u in range(total):
        if entering[u]:
            n_ent += 1
    nodes = np.empty(n_ent + n_ops, np.int64)
    k = 0
    for u in range(total):
        if entering[u]:
            nodes[k] = u
            k += 1
    for p in range(n_ops):
        nodes[n_ent + p] = ops[p] + n_in
    born = np.empty(n_ent + n_ops, np.int64)
    dies = np.empty(n_ent + n_ops, np.int64)
    allowance = 0
    for k in range(n_ent):
        u = nodes[k]
        born[k] = first_reader[u]
        dies[k] = last_reader[u]
        if height[u] > 1:
            allowance += row_elems[u]
    leaving = np.empty(n_ops, np.int64)
    n_leave = 0
    for p in range(n_ops):
        o = ops[p]
        k = n_ent + p
        leaves = output[o] == 1
        first = -1
        last = -1
        for q in range(succ_ptr[o], succ_ptr[o + 1]):
            c = pos[succ[q] + n_in]
            if c < 0:
                leaves = True
            else:
                if first < 0:
                    first = c
                last = c
        if pool[o] == 1:
            born[k] = 0
            dies[k] = n_ops - 1
        else:
            born[k] = p
            dies[k] = last if last >= 0 else p
        if leaves:
            leaving[n_leave] = k
            n_leave += 1
            if height[o + n_in] > 1:
                allowance += row_elems[o + n_in]
    return nodes, n_ent, leaving[:n_leave], born, dies, allowance


@njit(cache=True)
def bands(nodes, n_ent, leaving, counts, n_in, in_ptr, in_node, tab_off, tab_len, lo, hi,
          pool, height):
    """Rows of every tensor (rows of the result) each tile needs (columns: the tiles of every
    count of `counts` side by side), propagated back from the leaving bands
    (`simulator.cost.brr._Bands`); 0 where a tile does not need a tensor. Returns (first,
    last, rows): a tensor a tile does not need has first = its height, last = -1."""
    n = nodes.shape[0]
    cols = 0
    for c in range(counts.shape[0]):
        cols += counts[c]
    jj = np.empty(cols, np.int64)
    tt = np.empty(cols, np.int64)
    at = 0
    for c in range(counts.shape[0]):
        for j in range(counts[c]):
            jj[at] = j
            tt[at] = counts[c]
            at += 1
    index = np.full(height.shape[0], -1, np.int64)
    for k in range(n):
        index[nodes[k]] = k
    first = np.empty((n, cols), np.int64)
    last = np.full((n, cols), -1, np.int64)
    for k in range(n):
        h = height[nodes[k]]
        for c in range(cols):
            first[k, c] = h
    for m in range(leaving.shape[0]):
        k = leaving[m]
        h = height[nodes[k]]
        for c in range(cols):
            a = (jj[c] * h) // tt[c]
            z = ((jj[c] + 1) * h) // tt[c] - 1
            if z >= a:
                first[k, c] = a
                last[k, c] = z
    for k in range(n - 1, n_ent - 1, -1):  # the ops, last first
        o = nodes[k] - n_in
        if pool[o] == 1:
            r = index[in_node[in_ptr[o]]]
            h = height[nodes[r]]
            at = 0
            for c in range(counts.shape[0]):
                t = counts[c]
                needed = False
                for q in range(at, at + t):
                    if last[k, q] >= first[k, q]:
                        needed = True
                        break
                if needed:
                    for q in range(at, at + t):
                        a = (jj[q] * h) // t
                        z = ((jj[q] + 1) * h) // t - 1
                        if a < first[r, q]:
                            first[r, q] = a
                        if z > last[r, q]:
                            last[r, q] = z
                        first[k, q] = 0
                        last[k, q] = 0
                at += t
            continue
        for q in range(in_ptr[o], in_ptr[o + 1]):
            r = index[in_node[q]]
            off = tab_off[q]
            end = off + tab_len[q] - 1
            for c in range(cols):
                v = lo[off + first[k, c]]
                if v < first[r, c]:
                    first[r, c] = v
                z = last[k, c]
                w = hi[end] if z < 0 else hi[off + z]
                if w > last[r, c]:
                    last[r, c] = w
    rows = np.empty((n, cols), np.int64)
    for k in range(n):
        for c in range(cols):
            d = last[k, c] - first[k, c] + 1
            rows[k, c] = d if d > 0 else 0
    return first, last, rows


@njit(cache=True)
def one_tile(ops, n_in, in_ptr, in_node, succ_ptr, succ, pool, row_elems, most, read1,
             sliced_in):
    """`simulator.cost.brr.one_tile_floor` of the group `ops` (ascending op ids): the largest,
    over op positions, of the rows the one tile needs of every tensor live there (``most``
    per op; an entering tensor: the most ``read1``, per input slot, its readers read) times
    the tensor's row elements; lifetimes as `layout` (a global pooling's sum: throughout). An
    entering tensor read by one op alone that may run input-sliced (``sliced_in``: the node of
    an op's input where it can, else -1) counts nothing: that op may hold one channel of it."""
    n_ops = ops.shape[0]
    total = row_elems.shape[0]
    pos = np.full(total, -1, np.int64)
    for p in range(n_ops):
        pos[ops[p] + n_in] = p
    first = np.full(total, -1, np.int64)
    last = np.full(total, -1, np.int64)
    rows = np.zeros(total, np.int64)
    diff = np.zeros(n_ops + 1, np.int64)
    for p in range(n_ops):
        o = ops[p]
        for q in range(in_ptr[o], in_ptr[o + 1]):
            u = in_node[q]
            if pos[u] < 0:
                if first[u] < 0:
                    first[u] = p
                last[u] = p
                if read1[q] > rows[u]:
                    rows[u] = read1[q]
    for u in range(total):
        if first[u] >= 0 and not (first[u] == last[u] and sliced_in[ops[first[u]]] == u):
            s = rows[u] * row_elems[u]
            diff[first[u]] += s
            diff[last[u] + 1] -= s
    for p in range(n_ops):
        o = ops[p]
        b = p
        d = p
        for q in range(succ_ptr[o], succ_ptr[o + 1]):
            c = pos[succ[q] + n_in]
            if c > d:
                d = c
        if pool[o] == 1:
            b = 0
            d = n_ops - 1
        s = most[o] * row_elems[o + n_in]
        diff[b] += s
        diff[d + 1] -= s
    best = 0
    acc = 0
    for p in range(n_ops):
        acc += diff[p]
        if acc > best:
            best = acc
    return best


@njit(cache=True)
def live(rows, row_elems_k, born, dies, positions):
    """Live activation elements at each op position (rows) in each tile (columns): the tile's
    rows of every tensor whose lifetime covers the position (`simulator.cost.brr._live`)."""
    cols = rows.shape[1]
    diff = np.zeros((positions + 1, cols), np.int64)
    for k in range(rows.shape[0]):
        e = row_elems_k[k]
        b = born[k]
        d = dies[k] + 1
        for c in range(cols):
            s = rows[k, c] * e
            diff[b, c] += s
            diff[d, c] -= s
    out = np.empty((positions, cols), np.int64)
    for c in range(cols):
        acc = 0
        for p in range(positions):
            acc += diff[p, c]
            out[p, c] = acc
    return out


@njit(cache=True)
def block_summaries(rows, lv, counts, n_ent, heights_k, row_elems_k, allowance, mac_k, mac_v,
                    mac_h, weightless, w_pos, w_first_out, sl_i, sl_x, sl_o, sl_xchan,
                    sl_first_in, acc):
    """Per tile count (columns of the results): entering elements read, MACs, the most a
    weightless position holds (floor), and per op with weights (rows) the most its position
    holds (held), with its finest slice (finest) and input-sliced (sliced)
    (`simulator.cost.brr._blocks`)."""
    n_counts = counts.shape[0]
    positions = lv.shape[0]
    n_w = w_pos.shape[0]
    held = np.empty((positions, n_counts), np.int64)
    act = np.zeros(n_counts, np.int64)
    macs = np.zeros(n_counts, np.int64)
    floor = np.zeros(n_counts, np.int64)
    held_w = np.empty((n_w, n_counts), np.int64)
    finest = np.empty((n_w, n_counts), np.int64)
    sliced = np.empty((n_w, n_counts), np.int64)
    at = 0
    for c in range(n_counts):
        t = counts[c]
        for p in range(positions):
            m = lv[p, at]
            for q in range(at + 1, at + t):
                if lv[p, q] > m:
                    m = lv[p, q]
            held[p, c] = m + allowance
        for k in range(n_ent):
            s = 0
            for q in range(at, at + t):
                s += rows[k, q]
            if s < heights_k[k]:
                s = heights_k[k]
            act[c] += s * row_elems_k[k]
        for m in range(mac_k.shape[0]):
            s = 0
            for q in range(at, at + t):
                s += rows[mac_k[m], q]
            macs[c] += s * mac_v[m] // mac_h[m]
        f = 0
        for m in range(weightless.shape[0]):
            if held[weightless[m], c] > f:
                f = held[weightless[m], c]
        floor[c] = f
        for i in range(n_w):
            held_w[i, c] = held[w_pos[i], c]
            sliced[i, c] = held_w[i, c] + w_first_out[i]
            finest[i, c] = sliced[i, c]
        for m in range(sl_i.shape[0]):
            i = sl_i[m]
            x = sl_x[m]
            o = sl_o[m]
            best = 0
            for q in range(at, at + t):
                base = (lv[w_pos[i], q] - rows[x, q] * row_elems_k[x]
                        + (acc - 1) * rows[o, q] * row_elems_k[o] + allowance)
                v = base + rows[x, q] * sl_xchan[m]
                if q == at or v > best:
                    best = v
            alt = best + sl_first_in[m]
            sliced[i, c] = alt
            if alt < finest[i, c]:
                finest[i, c] = alt
        at += t
    return act, macs, floor, held_w, finest, sliced


@njit(cache=True)
def _ceil_div(x, by):
    return -(-x // by)


@njit(cache=True)
def cycles(rows, n_ent, born, node_h, node_re, sliced_input, op_macs, op_leaves, plan_kind,
           plan_slices, plan_chans, plan_elems, plan_x, resident_first, resident_cycles, d, bw,
           mpc, lat):
    """Cycles of a BRR group at a configuration (`simulator.cost.cycles.brr_cycles`, whose
    docstring has the schedule): `rows` its tile regions (tensors x tiles), per op position
    its MACs, whether its tensor leaves, how its weights are held (`plan_kind`: 0 no weights,
    1 resident, 2 streamed in output-channel slices, 3 in input-channel slices; slices,
    channels sliced, weight elements, row of its input), the position of the first op with
    resident weights (-1: none) and the channel cycles of the resident weights."""
    n_ops = rows.shape[0] - n_ent
    tiles = rows.shape[1]
    # the last tile, a serial schedule: pe, channel, waits, overlap, pending, queued
    l_pe = 0
    l_channel = 0
    l_waits = 0
    l_overlap = 0
    l_pending = False
    l_queued = 0
    if tiles == 1 and resident_cycles > 0:
        l_channel = resident_cycles
        l_queued = resident_cycles
        l_pending = True
    pe = 0
    channel = 0
    waits = 0
    first_wait = 3 * n_ops
    nb = np.empty(tiles, np.int64)
    for p in range(n_ops):
        k_op = n_ent + p
        for t in range(n_ent):  # entering tensors first read here, loaded tile by tile
            if born[t] != p or sliced_input[t]:
                continue
            rb = node_re[t] * d
            total_rows = 0
            for q in range(tiles):
                nb[q] = rows[t, q] * rb
                total_rows += rows[t, q]
            if nb[0] > 0 and 3 * p < first_wait:
                first_wait = 3 * p
            for q in range(tiles - 1):
                channel += int(math.ceil(nb[q] / bw))
                if nb[q] > 0:
                    waits += 1
            n = nb[tiles - 1]
            if n > 0:
                c = int(math.ceil(n / bw))
                l_channel += c
                l_queued += c
                l_pending = True
            if l_pending:  # wait
                l_waits += 1
                l_pending = False
            l_queued = 0
            unread = node_h[t] - total_rows
            n = (unread if unread > 0 else 0) * rb
            if n > 0:  # drop
                c = int(math.ceil(n / bw))
                l_channel += c
                l_queued += c
        h_o = node_h[k_op]
        kind = plan_kind[p]
        if kind <= 1:
            for q in range(tiles - 1):
                pe += _ceil_div(rows[k_op, q] * op_macs[p] // h_o, mpc)
            if tiles == 1 and kind == 1:
                if l_pending:
                    l_waits += 1
                    l_pending = False
                l_queued = 0
            c = _ceil_div(rows[k_op, tiles - 1] * op_macs[p] // h_o, mpc)
            l_pe += c
            hidden = min(c, l_queued)
            l_overlap += hidden
            l_queued -= hidden
        else:
            chans = plan_chans[p]
            x = plan_x[p]
            elems = plan_elems[p]
            if 3 * p + 1 < first_wait:
                first_wait = 3 * p + 1
            chunk = _ceil_div(chans, plan_slices[p])
            qq, rr = elems // chans, elems % chans
            for a in range(0, chans, chunk):
                b = min(a + chunk, chans)
                w = ((b - a) * qq + min(b, rr) - min(a, rr)) * d
                for q in range(tiles - 1):
                    if kind == 3:
                        xb = rows[x, q] * (node_re[x] * d) // chans * (b - a)
                        channel += int(math.ceil(xb / bw))
                    m = rows[k_op, q] * op_macs[p] // h_o
                    pe += _ceil_div(m * b // chans - m * a // chans, mpc)
                channel += (tiles - 1) * int(math.ceil(w / bw))
                waits += tiles - 1
                if kind == 3:
                    n = rows[x, tiles - 1] * (node_re[x] * d) // chans * (b - a)
                    if n > 0:
                        c = int(math.ceil(n / bw))
                        l_channel += c
                        l_queued += c
                        l_pending = True
                if w > 0:
                    c = int(math.ceil(w / bw))
                    l_channel += c
                    l_queued += c
                    l_pending = True
                if l_pending:
                    l_waits += 1
                    l_pending = False
                l_queued = 0
                m = rows[k_op, tiles - 1] * op_macs[p] // h_o
                c = _ceil_div(m * b // chans - m * a // chans, mpc)
                l_pe += c
                hidden = min(c, l_queued)
                l_overlap += hidden
                l_queued -= hidden
            if kind == 3:
                total_rows = 0
                for q in range(tiles):
                    total_rows += rows[x, q]
                unread = node_h[x] - total_rows
                n = (unread if unread > 0 else 0) * node_re[x] * d
                if n > 0:
                    c = int(math.ceil(n / bw))
                    l_channel += c
                    l_queued += c
        if op_leaves[p]:  # the band written back, waited for
            rb = node_re[k_op] * d
            for q in range(tiles):
                nb[q] = ((q + 1) * h_o // tiles - q * h_o // tiles) * rb
            if nb[0] > 0 and 3 * p + 2 < first_wait:
                first_wait = 3 * p + 2
            for q in range(tiles - 1):
                channel += int(math.ceil(nb[q] / bw))
                if nb[q] > 0:
                    waits += 1
            n = nb[tiles - 1]
            if n > 0:
                c = int(math.ceil(n / bw))
                l_channel += c
                l_queued += c
                l_pending = True
            if l_pending:
                l_waits += 1
                l_pending = False
            l_queued = 0
    if tiles > 1 and resident_first >= 0:
        channel += resident_cycles
        if 3 * resident_first + 1 < first_wait:
            waits += 1
    return (l_pe + l_channel + lat * l_waits - l_overlap) + pe + channel + lat * waits


@njit(cache=True)
def window_tables(tab_off, tab_len, lo, hi):
    """Per input slot q, w[r] = the fewest rows of the input that r consecutive output rows
    of the op read (w[0] = 0): ``min over a of hi[a+r-1] - lo[a] + 1`` over the unpadded
    tables (`simulator.cost.brr._least_window`), laid out like the padded tables."""
    out = np.zeros(lo.shape[0], np.int64)
    for q in range(tab_off.shape[0]):
        off = tab_off[q]
        h = tab_len[q] - 1
        for r in range(1, h + 1):
            best = hi[off + r - 1] - lo[off]
            for a in range(1, h - r + 1):
                v = hi[off + a + r - 1] - lo[off + a]
                if v < best:
                    best = v
            out[off + r] = best + 1 if best + 1 > 0 else 0
    return out


@njit(cache=True)
def least_rows(nodes, n_ent, leaving, tiles, n_in, in_ptr, in_node, tab_off, win, pool, useful,
               height):
    """Rows of every tensor (rows) that every tile of T tiles needs at least (columns: T in
    `tiles`): the leaving bands' least height, propagated to the inputs by the window tables
    (`simulator.cost.brr._least_rows`)."""
    tmax = tiles.shape[0]
    n = nodes.shape[0]
    index = np.full(height.shape[0], -1, np.int64)
    for k in range(n):
        index[nodes[k]] = k
    least = np.zeros((n, tmax), np.int64)
    for m in range(leaving.shape[0]):
        k = leaving[m]
        h = height[nodes[k]]
        for c in range(tmax):
            least[k, c] = h // tiles[c]
    for k in range(n - 1, n_ent - 1, -1):
        o = nodes[k] - n_in
        for q in range(in_ptr[o], in_ptr[o + 1]):
            u = in_node[q]
            dup = False  # each distinct input once (its slots are all read below)
            for q2 in range(in_ptr[o], q):
                if in_node[q2] == u:
                    dup = True
            if dup:
                continue
            r = index[u]
            for c in range(tmax):
                if pool[o] == 1:
                    v = height[u] // tiles[c] * useful[o]
                else:
                    v = 0
                    for q2 in range(q, in_ptr[o + 1]):
                        if in_node[q2] == u:
                            w = win[tab_off[q2] + least[k, c]]
                            if w > v:
                                v = w
                if v > least[r, c]:
                    least[r, c] = v
    return least


@njit(cache=True)
def fit_bound(least, lv, allowance, w_pos, w_first_out, sl_i, sl_x, sl_o, sl_xchan,
              sl_first_in, acc, row_elems_k, heights_k, n_ent, weight_sum, limit):
    """`simulator.cost.brr.dram_lower_bound` from the least rows (tensors x T = 1 ..) and
    their live elements: the least F_D (elements, writes excluded) over the tile counts
    whose floors fit `limit`, or -1 when none does."""
    positions, tmax = lv.shape
    best = -1
    act_floor = np.empty(positions, np.int64)
    need = np.empty(positions, np.int64)
    for c in range(tmax):
        for p in range(positions):
            act_floor[p] = lv[p, c] + allowance
            need[p] = act_floor[p]
        for i in range(w_pos.shape[0]):
            need[w_pos[i]] += w_first_out[i]
        for m in range(sl_i.shape[0]):
            p = w_pos[sl_i[m]]
            x = sl_x[m]
            o = sl_o[m]
            alt = (act_floor[p] - least[x, c] * (row_elems_k[x] - sl_xchan[m])
                   + (acc - 1) * least[o, c] * row_elems_k[o])
            if alt < act_floor[p]:
                act_floor[p] = alt
            if alt + sl_first_in[m] < need[p]:
                need[p] = alt + sl_first_in[m]
        top_need = need[0]
        top_act = act_floor[0]
        for p in range(1, positions):
            if need[p] > top_need:
                top_need = need[p]
            if act_floor[p] > top_act:
                top_act = act_floor[p]
        if top_need > limit:
            continue
        t = c + 1
        act = 0
        for k in range(n_ent):
            r = t * least[k, c]
            if r < heights_k[k]:
                r = heights_k[k]
            act += r * row_elems_k[k]
        streamed = weight_sum - (limit - top_act)
        if streamed < 0:
            streamed = 0
        dram = act + weight_sum + (t - 1) * streamed
        if best < 0 or dram < best:
            best = dram
    return best


# --- the whole configuration search (`simulator.cost.brr._search` and what it calls) ------

_RESIDENCY_NODES = 512  # `simulator.cost.brr._RESIDENCY_NODES`
_FILL_STEPS = 4096  # `simulator.cost.brr._FILL_STEPS`
_MAX_COUNTS = 128  # tile counts one search evaluates, at most (~2 log2 of the tallest height)


@njit(cache=True)
def _slice_elems(elems, chans, start, stop):
    q = elems // chans
    r = elems % chans
    return (stop - start) * q + min(stop, r) - min(start, r)


@njit(cache=True)
def _largest_chunk(budget, elems, chans):
    if budget >= elems:
        return chans
    q = elems // chans
    r = elems % chans
    best = min(r, budget // (q + 1)) if budget > 0 else 0
    if q > 0 and budget >= r:
        c = min(chans, (budget - r) // q)
        if c > r:
            best = max(best, c)
    return best


@njit(cache=True)
def _fill(w, room):
    """`simulator.cost.brr._fill` over a boolean reach table. Returns (sum, chosen flags)."""
    n = w.shape[0]
    unit = max(1, -(-room // _FILL_STEPS))
    cap = room // unit
    scaled = np.empty(n, np.int64)
    for i in range(n):
        scaled[i] = -(-w[i] // unit)
    reach = np.zeros(cap + 1, np.bool_)
    reach[0] = True
    history = np.zeros((n, cap + 1), np.bool_)
    for i in range(n):
        history[i, :] = reach
        x = scaled[i]
        if x <= cap:
            for s in range(cap, x - 1, -1):
                if reach[s - x]:
                    reach[s] = True
    target = 0
    for s in range(cap, -1, -1):
        if reach[s]:
            target = s
            break
    chosen = np.zeros(n, np.bool_)
    total = 0
    for i in range(n - 1, -1, -1):
        if not history[i, target]:
            chosen[i] = True
            target -= scaled[i]
            total += w[i]
    for i in range(n):
        if not chosen[i] and total + w[i] <= room:
            total += w[i]
            chosen[i] = True
    return total, chosen


@njit(cache=True)
def _first_fit(w, h, f, floor, limit):
    """`simulator.cost.brr._first_fit`: (resident weights, flags by the order of `w`)."""
    k = w.shape[0]
    v0 = floor
    for i in range(k):
        m = min(h[i], f[i])
        if m > v0:
            v0 = m
    values = np.empty(2 * k + 1, np.int64)
    nv = 1
    values[0] = v0
    for i in range(k):
        if h[i] > v0:
            values[nv] = h[i]
            nv += 1
        if f[i] > v0:
            values[nv] = f[i]
            nv += 1
    values = np.unique(values[:nv])
    best_w = -1
    best = np.zeros(k, np.bool_)
    for vi in range(values.shape[0]):
        v = values[vi]
        if limit - v <= best_w:
            break
        total = 0
        mask = np.zeros(k, np.bool_)
        free = np.empty(k, np.int64)
        nf = 0
        for i in range(k):
            if f[i] > v:
                total += w[i]
                mask[i] = True
            elif h[i] <= v:
                free[nf] = i
                nf += 1
        room = limit - v - total
        if room < 0:
            continue
        fw = np.empty(nf, np.int64)
        for m in range(nf):
            fw[m] = w[free[m]]
        added, chosen = _fill(fw, room)
        if total + added > best_w:
            best_w = total + added
            for m in range(nf):
                if chosen[m]:
                    mask[free[m]] = True
            best = mask
    return best_w, best


@njit(cache=True)
def _residency(tiles, elems, held, finest, floor, limit):
    """`simulator.cost.brr._residency`: which ops with weights keep them resident."""
    k = elems.shape[0]
    resident = np.zeros(k, np.bool_)
    if tiles == 1 or k == 0:
        return resident
    order = np.argsort(-elems, kind="mergesort")  # by decreasing weights, ties: lower index
    w = elems[order]
    h = held[order]
    f = finest[order]
    rest_w = np.zeros(k + 1, np.int64)
    rest_f = np.zeros(k + 1, np.int64)
    rest_min = np.zeros(k + 1, np.int64)
    for i in range(k - 1, -1, -1):
        rest_w[i] = rest_w[i + 1] + w[i]
        rest_f[i] = max(rest_f[i + 1], f[i])
        rest_min[i] = max(rest_min[i + 1], min(h[i], f[i]))
    best_w, best = _first_fit(w, h, f, floor, limit)
    # the search tree: node n decided op depth[n] - 1 (resident or not) below parent[n]
    cap = 2 * _RESIDENCY_NODES + 2
    parent = np.empty(cap, np.int64)
    bit = np.zeros(cap, np.bool_)
    parent[0] = -1
    n_nodes = 1
    s_i = np.empty(cap, np.int64)
    s_total = np.empty(cap, np.int64)
    s_h = np.empty(cap, np.int64)
    s_f = np.empty(cap, np.int64)
    s_node = np.empty(cap, np.int64)
    top = 0
    s_i[0], s_total[0], s_h[0], s_f[0], s_node[0] = 0, 0, floor, 0, 0
    top = 1
    expanded = 0
    while top > 0 and expanded < _RESIDENCY_NODES:
        top -= 1
        i, total, top_h, top_f, node = s_i[top], s_total[top], s_h[top], s_f[top], s_node[top]
        expanded += 1
        least = max(top_h, top_f, rest_min[i])
        if total + least > limit or min(total + rest_w[i], limit - least) <= best_w:
            continue
        if total > best_w and total + max(top_h, top_f, rest_f[i]) <= limit:
            best_w = total
            best = np.zeros(k, np.bool_)
            m = node
            d = i
            while m > 0:
                d -= 1
                best[d] = bit[m]
                m = parent[m]
        if i < k:
            parent[n_nodes] = node  # streamed
            bit[n_nodes] = False
            s_i[top], s_total[top], s_h[top] = i + 1, total, top_h
            s_f[top], s_node[top] = max(top_f, f[i]), n_nodes
            n_nodes += 1
            top += 1
            parent[n_nodes] = node  # resident (explored first)
            bit[n_nodes] = True
            s_i[top], s_total[top], s_h[top] = i + 1, total + w[i], max(top_h, h[i])
            s_f[top], s_node[top] = top_f, n_nodes
            n_nodes += 1
            top += 1
    for j in range(k):
        if best[j]:
            resident[order[j]] = True
    return resident


@njit(cache=True)
def _sliced_need(lv, rows, p, x, o, re_x, re_o, x_chan, acc, allowance, c):
    """The most op position p holds over the tiles input-sliced at c channels, less the
    weights: max over tiles of base + c per (`simulator.cost.brr._Block.sliced`)."""
    best = 0
    for q in range(rows.shape[1]):
        base = lv[p, q] - rows[x, q] * re_x + (acc - 1) * rows[o, q] * re_o + allowance
        v = base + c * rows[x, q] * x_chan
        if q == 0 or v > best:
            best = v
    return best


@njit(cache=True)
def search(nodes, n_ent, leaving, born, dies, allowance, heights_k, row_elems_k, n_in, in_ptr,
           in_node, tab_off, tab_len, lo, hi, pool, height, mac_k, mac_v, mac_h, weightless,
           w_pos, w_elems, w_out, w_in, w_x, w_xchan, w_first_out, w_first_in, sl_i, sl_x,
           sl_o, sl_xchan, sl_first_in, acc, limit, one_tile):
    """`simulator.cost.brr._search` and `_configure`: the configuration of least F_D that
    fits (ties: fewer tiles), else the least demanding, of the group whose layout is given
    (`one_tile`: the configuration of one tile, what a group BRR cannot tile reports).

    Returns (tiles, buffer_elems, act, weight_reads, macs, resident, split (1: input
    channels), slices, chunk, slice_elems, rows of the chosen tile count)."""
    positions = born.shape[0] - n_ent
    k = w_pos.shape[0]
    weight_sum = 0
    for i in range(k):
        weight_sum += w_elems[i]
    # one tile holding whole tensors: if it fits, so does T = 1, and nothing is cheaper
    whole = np.empty((heights_k.shape[0], 1), np.int64)
    whole[:, 0] = heights_k
    one = np.ones(1, np.int64)
    lvw = live(whole, row_elems_k, born, dies, positions)
    _, _, fl, _, fn, _ = block_summaries(whole, lvw, one, n_ent, heights_k, row_elems_k,
                                         allowance, mac_k, mac_v, mac_h, weightless, w_pos,
                                         w_first_out, sl_i, sl_x, sl_o, sl_xchan, sl_first_in,
                                         acc)
    whole_least = fl[0]
    for i in range(k):
        whole_least = max(whole_least, fn[i, 0])
    # evaluated tile counts and their summaries
    t_c = np.zeros(_MAX_COUNTS, np.int64)
    act_c = np.zeros(_MAX_COUNTS, np.int64)
    macs_c = np.zeros(_MAX_COUNTS, np.int64)
    floor_c = np.zeros(_MAX_COUNTS, np.int64)
    least_c = np.zeros(_MAX_COUNTS, np.int64)
    held_c = np.zeros((_MAX_COUNTS, k), np.int64)
    finest_c = np.zeros((_MAX_COUNTS, k), np.int64)
    sliced_c = np.zeros((_MAX_COUNTS, k), np.int64)
    n_c = 0
    if whole_least <= limit or one_tile:
        counts = np.ones(1, np.int64)
    else:
        tmax = 1
        for r in range(heights_k.shape[0]):
            tmax = max(tmax, heights_k[r])
        raw = np.empty(70, np.int64)
        nr = 0
        raw[nr] = 1
        nr += 1
        raw[nr] = tmax
        nr += 1
        p2 = 1
        while p2 <= tmax:  # 1 << k for k < tmax.bit_length()
            raw[nr] = p2
            nr += 1
            p2 *= 2
        counts = np.unique(raw[:nr])
    _, _, rows_all = bands(nodes, n_ent, leaving, counts, n_in, in_ptr, in_node, tab_off,
                           tab_len, lo, hi, pool, height)
    lv_all = live(rows_all, row_elems_k, born, dies, positions)
    a, m, fl, hw_, fn, sl = block_summaries(rows_all, lv_all, counts, n_ent, heights_k,
                                            row_elems_k, allowance, mac_k, mac_v, mac_h,
                                            weightless, w_pos, w_first_out, sl_i, sl_x, sl_o,
                                            sl_xchan, sl_first_in, acc)
    for c in range(counts.shape[0]):
        t_c[n_c], act_c[n_c], macs_c[n_c], floor_c[n_c] = counts[c], a[c], m[c], fl[c]
        least = fl[c]
        for i in range(k):
            held_c[n_c, i] = hw_[i, c]
            finest_c[n_c, i] = fn[i, c]
            sliced_c[n_c, i] = sl[i, c]
            least = max(least, fn[i, c])
        least_c[n_c] = least
        n_c += 1
    n_first = n_c
    chosen = -1  # index of the chosen count
    resident = np.zeros(k, np.bool_)
    fitting0 = -1
    for c in range(n_first):
        if least_c[c] <= limit:
            fitting0 = c
            break
    if whole_least <= limit or one_tile:
        chosen = 0  # T = 1, nothing resident
    elif fitting0 < 0:  # none fits: report the least demanding count
        chosen = 0
        for c in range(1, n_first):
            if least_c[c] < least_c[chosen]:
                chosen = c
    else:
        if t_c[fitting0] > 1:
            lo_t = t_c[fitting0 - 1]
            hi_t = t_c[fitting0]
            while hi_t - lo_t > 1:
                mid = (lo_t + hi_t) // 2
                one[0] = mid
                _, _, rows_m = bands(nodes, n_ent, leaving, one, n_in, in_ptr, in_node,
                                     tab_off, tab_len, lo, hi, pool, height)
                lv_m = live(rows_m, row_elems_k, born, dies, positions)
                a, m, fl, hw_, fn, sl = block_summaries(
                    rows_m, lv_m, one, n_ent, heights_k, row_elems_k, allowance, mac_k,
                    mac_v, mac_h, weightless, w_pos, w_first_out, sl_i, sl_x, sl_o, sl_xchan,
                    sl_first_in, acc)
                t_c[n_c], act_c[n_c], macs_c[n_c], floor_c[n_c] = mid, a[0], m[0], fl[0]
                least = fl[0]
                for i in range(k):
                    held_c[n_c, i] = hw_[i, 0]
                    finest_c[n_c, i] = fn[i, 0]
                    sliced_c[n_c, i] = sl[i, 0]
                    least = max(least, fn[i, 0])
                least_c[n_c] = least
                if least <= limit:
                    hi_t = mid
                else:
                    lo_t = mid
                n_c += 1
        # F_D >= act + W + (T - 1) (W - what can be resident next to the least held
        # position): counts whose floor cannot beat the best found are not configured
        floor_v = np.empty(n_c, np.int64)
        cand = np.empty(n_c, np.int64)
        n_f = 0
        for c in range(n_c):
            if least_c[c] > limit:
                continue
            top = floor_c[c]
            for i in range(k):
                top = max(top, min(held_c[c, i], finest_c[c, i]))
            room = limit - top
            floor_v[n_f] = act_c[c] + weight_sum + (t_c[c] - 1) * max(weight_sum - room, 0)
            cand[n_f] = c
            n_f += 1
        best_fd = -1
        best_t = -1
        done = np.zeros(n_f, np.bool_)
        for _ in range(n_f):  # by (floor, tiles) ascending
            j = -1
            for q in range(n_f):
                if done[q]:
                    continue
                if j < 0 or (floor_v[q], t_c[cand[q]]) < (floor_v[j], t_c[cand[j]]):
                    j = q
            done[j] = True
            c = cand[j]
            if best_t >= 0 and (floor_v[j], t_c[c]) > (best_fd, best_t):
                break
            res = _residency(t_c[c], w_elems, held_c[c], finest_c[c], floor_c[c], limit)
            kept = 0
            for i in range(k):
                if res[i]:
                    kept += w_elems[i]
            fd = act_c[c] + kept + t_c[c] * (weight_sum - kept)
            if best_t < 0 or (fd, t_c[c]) < (best_fd, best_t):
                best_fd, best_t, chosen, resident = fd, t_c[c], c, res
    # the chosen count's regions (the slices and the schedule read them)
    one[0] = t_c[chosen]
    _, _, rows = bands(nodes, n_ent, leaving, one, n_in, in_ptr, in_node, tab_off, tab_len,
                       lo, hi, pool, height)
    lv = live(rows, row_elems_k, born, dies, positions)
    # configure: streamed ops in the fewest slices that fit, or their finest when none does
    c = chosen
    total = 0
    top = floor_c[c]
    for i in range(k):
        if resident[i]:
            total += w_elems[i]
            top = max(top, held_c[c, i])
        else:
            top = max(top, finest_c[c, i])
    fits = total + top <= limit
    peak = floor_c[c]
    split = np.zeros(k, np.int64)
    slices = np.ones(k, np.int64)
    chunk = np.zeros(k, np.int64)
    first = np.zeros(k, np.int64)
    streamed = 0
    for i in range(k):
        if resident[i]:
            chunk[i], first[i] = w_out[i], w_elems[i]
            peak = max(peak, held_c[c, i])
            continue
        streamed += w_elems[i]
        p = w_pos[i]
        if not fits:  # finest slices of the split that needs less (ties: output)
            out = held_c[c, i] + w_first_out[i]
            if w_in[i] > 0 and sliced_c[c, i] < out:
                split[i], slices[i], chunk[i], first[i] = 1, w_in[i], 1, w_first_in[i]
                peak = max(peak, sliced_c[c, i])
            else:
                split[i], slices[i], chunk[i], first[i] = 0, w_out[i], 1, w_first_out[i]
                peak = max(peak, out)
            continue
        budget = limit - total
        best_s = -1
        best_split = 0
        best_chunk = 0
        cc = _largest_chunk(budget - held_c[c, i], w_elems[i], w_out[i])
        if cc > 0:
            s = -(-w_out[i] // cc)
            best_s, best_split, best_chunk = s, 0, -(-w_out[i] // s)
        if w_in[i] > 0:
            x = w_x[i]
            o = n_ent + p
            re_x, re_o = row_elems_k[x], row_elems_k[o]
            need1 = (_sliced_need(lv, rows, p, x, o, re_x, re_o, w_xchan[i], acc, allowance, 1)
                     + _slice_elems(w_elems[i], w_in[i], 0, 1))
            if need1 <= budget:
                lo_c, hi_c = 1, w_in[i]
                while hi_c > lo_c:
                    mid = (lo_c + hi_c + 1) // 2
                    need = (_sliced_need(lv, rows, p, x, o, re_x, re_o, w_xchan[i], acc,
                                         allowance, mid)
                            + _slice_elems(w_elems[i], w_in[i], 0, mid))
                    if need <= budget:
                        lo_c = mid
                    else:
                        hi_c = mid - 1
                s = -(-w_in[i] // lo_c)
                if best_s < 0 or s < best_s:
                    best_s, best_split, best_chunk = s, 1, -(-w_in[i] // s)
        split[i], slices[i], chunk[i] = best_split, best_s, best_chunk
        if best_split == 0:
            first[i] = _slice_elems(w_elems[i], w_out[i], 0, best_chunk)
            need_at = held_c[c, i] + first[i]
        else:
            first[i] = _slice_elems(w_elems[i], w_in[i], 0, best_chunk)
            x = w_x[i]
            o = n_ent + p
            need_at = _sliced_need(lv, rows, p, x, o, row_elems_k[x], row_elems_k[o],
                                   w_xchan[i], acc, allowance, best_chunk) + first[i]
        peak = max(peak, need_at)
    return (t_c[c], total + peak, act_c[c], total + t_c[c] * streamed, macs_c[c], resident,
            split, slices, chunk, first, rows)


@njit(cache=True)
def _group_layout(ops, n_in, in_ptr, in_node, succ_ptr, succ, output, pool, height, row_elems,
                  macs, weights, w_cout, w_first_out, w_chans, w_first_in, w_xchan, w_xnode):
    """`layout` and the arrays of the group's ops with weights and MACs that `search` and
    `fit_bound` read (`simulator.cost.brr._Layout`: ``_w``, ``mac_arrays``,
    ``sliceable_arrays``, ``weightless``)."""
    nodes, n_ent, leaving, born, dies, allowance = layout(
        ops, n_in, in_ptr, in_node, succ_ptr, succ, output, pool, height, row_elems)
    n = nodes.shape[0]
    n_ops = ops.shape[0]
    heights_k = np.empty(n, np.int64)
    row_elems_k = np.empty(n, np.int64)
    for r in range(n):
        heights_k[r] = height[nodes[r]]
        row_elems_k[r] = row_elems[nodes[r]]
    k = 0
    n_mac = 0
    for p in range(n_ops):
        if weights[ops[p]] > 0:
            k += 1
        if macs[ops[p]] != 0:
            n_mac += 1
    w_pos = np.empty(k, np.int64)
    weightless = np.empty(n_ops - k, np.int64)
    w_ops = np.empty(k, np.int64)
    w_elems = np.empty(k, np.int64)
    w_out = np.empty(k, np.int64)
    w_in = np.zeros(k, np.int64)
    w_x = np.zeros(k, np.int64)
    w_xc = np.zeros(k, np.int64)
    w_fo = np.empty(k, np.int64)
    w_fi = np.zeros(k, np.int64)
    mac_k = np.empty(n_mac, np.int64)
    mac_v = np.empty(n_mac, np.int64)
    mac_h = np.empty(n_mac, np.int64)
    i = 0
    j = 0
    m = 0
    n_sl = 0
    for p in range(n_ops):
        o = ops[p]
        if macs[o] != 0:
            mac_k[m], mac_v[m], mac_h[m] = n_ent + p, macs[o], heights_k[n_ent + p]
            m += 1
        if weights[o] == 0:
            weightless[j] = p
            j += 1
            continue
        w_pos[i], w_ops[i], w_elems[i] = p, o, weights[o]
        w_out[i], w_fo[i] = w_cout[o], w_first_out[o]
        if w_chans[o] > 0:  # input-sliceable here: its one input enters, read by it alone
            for r in range(n_ent):
                if nodes[r] == w_xnode[o]:
                    if born[r] == p and dies[r] == p:
                        w_in[i], w_x[i], w_xc[i], w_fi[i] = w_chans[o], r, w_xchan[o], \
                            w_first_in[o]
                        n_sl += 1
                    break
        i += 1
    sl_i = np.empty(n_sl, np.int64)
    sl_x = np.empty(n_sl, np.int64)
    sl_o = np.empty(n_sl, np.int64)
    sl_xchan = np.empty(n_sl, np.int64)
    sl_first_in = np.empty(n_sl, np.int64)
    m = 0
    for i in range(k):
        if w_in[i] > 0:
            sl_i[m], sl_x[m], sl_o[m] = i, w_x[i], n_ent + w_pos[i]
            sl_xchan[m], sl_first_in[m] = w_xc[i], w_fi[i]
            m += 1
    return (nodes, n_ent, leaving, born, dies, allowance, heights_k, row_elems_k, k, w_pos,
            weightless, w_ops, w_elems, w_out, w_in, w_x, w_xc, w_fo, w_fi, mac_k, mac_v, mac_h,
            sl_i, sl_x, sl_o, sl_xchan, sl_first_in)


@njit(cache=True)
def group(ops, n_in, in_ptr, in_node, succ_ptr, succ, output, pool, height, row_elems, tab_off,
          tab_len, lo, hi, macs, weights, w_cout, w_first_out, w_chans, w_first_in, w_xchan,
          w_xnode, op_traffic, output_elems, acc, limit, d, bw, mpc, lat, tileable):
    """A BRR group costed whole (`simulator.cost.brr.group_cost`): its layout, the
    configuration `search` picks (one tile's where it is not `tileable`) and, when it fits
    and is tileable, the cycles of its schedule (-1 otherwise). Returns (tiles, buffer_elems,
    act, weight_reads, macs, write_elems, traffic_elems, allowance, cycles, the weighted ops,
    resident, split, slices, chunk, slice_elems)."""
    (nodes, n_ent, leaving, born, dies, allowance, heights_k, row_elems_k, k, w_pos, weightless,
     w_ops, w_elems, w_out, w_in, w_x, w_xc, w_fo, w_fi, mac_k, mac_v, mac_h, sl_i, sl_x, sl_o,
     sl_xchan, sl_first_in) = _group_layout(
        ops, n_in, in_ptr, in_node, succ_ptr, succ, output, pool, height, row_elems, macs,
        weights, w_cout, w_first_out, w_chans, w_first_in, w_xchan, w_xnode)
    n_ops = ops.shape[0]
    (tiles, buffer_elems, act, weight_reads, n_macs, resident, split, slices, chunk, first,
     rows) = search(nodes, n_ent, leaving, born, dies, allowance, heights_k, row_elems_k, n_in,
                    in_ptr, in_node, tab_off, tab_len, lo, hi, pool, height, mac_k, mac_v,
                    mac_h, weightless, w_pos, w_elems, w_out, w_in, w_x, w_xc, w_fo, w_fi,
                    sl_i, sl_x, sl_o, sl_xchan, sl_first_in, acc, limit, not tileable)
    write_elems = 0
    for q in range(leaving.shape[0]):
        write_elems += output_elems[nodes[leaving[q]] - n_in]
    traffic = 0
    for p in range(n_ops):
        traffic += op_traffic[ops[p]]
    cyc = -1
    if buffer_elems <= limit and tileable:
        kind = np.zeros(n_ops, np.int64)
        p_slices = np.zeros(n_ops, np.int64)
        p_chans = np.zeros(n_ops, np.int64)
        p_elems = np.zeros(n_ops, np.int64)
        p_x = np.zeros(n_ops, np.int64)
        sliced_input = np.zeros(n_ent, np.bool_)
        resident_first = -1
        resident_cycles = 0
        for i in range(k):
            p = w_pos[i]
            if resident[i]:
                kind[p] = 1
                resident_cycles += int(math.ceil(first[i] * d / bw))
                if resident_first < 0:
                    resident_first = p
                continue
            p_slices[p], p_elems[p] = slices[i], w_elems[i]
            if split[i] == 1:
                kind[p], p_chans[p], p_x[p] = 3, w_in[i], w_x[i]
                sliced_input[w_x[i]] = True
            else:
                kind[p], p_chans[p] = 2, w_out[i]
        leaves = np.zeros(n_ops, np.bool_)
        for q in range(leaving.shape[0]):
            leaves[leaving[q] - n_ent] = True
        op_macs = np.empty(n_ops, np.int64)
        for p in range(n_ops):
            op_macs[p] = macs[ops[p]]
        cyc = cycles(rows, n_ent, born, heights_k, row_elems_k, sliced_input, op_macs, leaves,
                     kind, p_slices, p_chans, p_elems, p_x, resident_first, resident_cycles, d,
                     bw, mpc, lat)
    return (tiles, buffer_elems, act, weight_reads, n_macs, write_elems, traffic, allowance,
            cyc, w_ops, resident, split, slices, chunk, first)


@njit(cache=True)
def bound(ops, n_in, in_ptr, in_node, succ_ptr, succ, output, pool, height, row_elems, tab_off,
          win, useful, macs, weights, w_cout, w_first_out, w_chans, w_first_in, w_xchan,
          w_xnode, output_elems, acc, limit):
    """`simulator.cost.brr.dram_lower_bound` of a group BRR can tile, in elements (-1: it
    cannot fit): `least_rows` over T = 1 .. the tallest height, then `fit_bound`, plus the
    writes."""
    (nodes, n_ent, leaving, born, dies, allowance, heights_k, row_elems_k, k, w_pos, weightless,
     w_ops, w_elems, w_out, w_in, w_x, w_xc, w_fo, w_fi, mac_k, mac_v, mac_h, sl_i, sl_x, sl_o,
     sl_xchan, sl_first_in) = _group_layout(
        ops, n_in, in_ptr, in_node, succ_ptr, succ, output, pool, height, row_elems, macs,
        weights, w_cout, w_first_out, w_chans, w_first_in, w_xchan, w_xnode)
    tmax = 1
    for r in range(heights_k.shape[0]):
        tmax = max(tmax, heights_k[r])
    tiles = np.arange(1, tmax + 1)
    least = least_rows(nodes, n_ent, leaving, tiles, n_in, in_ptr, in_node, tab_off, win, pool,
                       useful, height)
    weight_sum = 0
    for i in range(k):
        weight_sum += w_elems[i]
    dram = fit_bound(least, live(least, row_elems_k, born, dies, ops.shape[0]), allowance,
                     w_pos, w_fo, sl_i, sl_x, sl_o, sl_xchan, sl_first_in, acc, row_elems_k,
                     heights_k, n_ent, weight_sum, limit)
    if dram < 0:
        return -1
    for q in range(leaving.shape[0]):
        dram += heights_k[leaving[q]] * row_elems_k[leaving[q]]
    return dram


@njit(cache=True)
def broadcast(ops, n_in, in_ptr, in_node, whole_from_rows, height):
    """Whether the group `ops` (ascending) broadcasts a single-row tensor that depends on a
    whole feature map onto a feature map (`simulator.cost.brr.incompatibility`): the first
    (op, its input) that does so in op order, else (-1, -1)."""
    n_ops = ops.shape[0]
    pos = np.full(height.shape[0] - n_in, -1, np.int64)
    for p in range(n_ops):
        pos[ops[p]] = p
    whole = np.zeros(n_ops, np.bool_)
    for p in range(n_ops):
        o = ops[p]
        if whole_from_rows[o]:
            whole[p] = True
            continue
        for q in range(in_ptr[o], in_ptr[o + 1]):  # whole-map dependence flows forward
            u = in_node[q]
            if u >= n_in and pos[u - n_in] >= 0 and whole[pos[u - n_in]]:
                whole[p] = True
                break
    for p in range(n_ops):
        o = ops[p]
        for q in range(in_ptr[o], in_ptr[o + 1]):
            u = in_node[q]
            if (u >= n_in and pos[u - n_in] >= 0 and whole[pos[u - n_in]] and height[u] == 1
                    and height[o + n_in] > 1):
                return o, u - n_in
    return -1, -1

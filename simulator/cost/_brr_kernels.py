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
        self.weights = np.array([op.weight_elems for op in graph], dtype=np.int64)
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
        return np.array([sum(g.tensor_elems(r) for r in op.inputs) + op.weight_elems
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

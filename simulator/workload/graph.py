"""The workload IR: an immutable, topologically numbered DAG of CNN operations.

A `ComputeGraph` holds `Op` records numbered 0..n-1 so that every edge (i, j) has i < j. Each op
produces exactly one tensor (its output); an edge is that tensor flowing to a consumer. Network
inputs are not ops: an op input refers either to a producing op (a non-negative id) or to network
input k, encoded as ``-(k + 1)`` (see `input_ref` / `is_network_input`). Tensor sizes are kept in
elements; bytes are elements times the hardware's ``dtype_bytes``.

Graphs are values: passes return new graphs, and nothing here mutates one after construction.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from functools import cached_property
from typing import Any

import networkx as nx

from simulator.errors import InputError

__all__ = [
    "ComputeGraph",
    "GraphError",
    "MappingType",
    "Op",
    "OpFields",
    "OpKind",
    "Shape",
    "default_mapping",
    "input_ref",
    "is_network_input",
    "network_input_index",
]

Shape = tuple[int, ...]
GRAPH_FORMAT = "fusion-dse.graph"
GRAPH_FORMAT_VERSION = 1


class GraphError(InputError):
    """A graph that breaks an IR invariant (cycle, bad reference, shape mismatch)."""


class OpKind(StrEnum):
    """Coarse operation classes the cost models distinguish (docs/ir.md): ``NORM`` is a
    LayerNorm / GroupNorm / RMSNorm over attr ``axes``, ``MATMUL`` a product of two
    activations (a product with a constant matrix is ``LINEAR``)."""

    CONV = "conv"
    DWCONV = "dwconv"
    POOL = "pool"
    GLOBAL_POOL = "global_pool"
    ELTWISE_UNARY = "eltwise_unary"
    ELTWISE_BINARY = "eltwise_binary"
    BATCHNORM = "batchnorm"
    CONCAT = "concat"
    SLICE = "slice"
    LINEAR = "linear"
    RESIZE = "resize"
    PAD = "pad"
    RESHAPE = "reshape"
    TRANSPOSE = "transpose"
    SOFTMAX = "softmax"
    NORM = "norm"
    MATMUL = "matmul"
    OPAQUE = "opaque"


class MappingType(StrEnum):
    """DNNFusion's input-to-output element mapping classes (Niu et al. 2021, Table 2)."""

    ONE_TO_ONE = "One-to-One"
    ONE_TO_MANY = "One-to-Many"
    MANY_TO_MANY = "Many-to-Many"
    REORGANIZE = "Reorganize"
    SHUFFLE = "Shuffle"


_KIND_MAPPING = {
    OpKind.CONV: MappingType.MANY_TO_MANY,
    OpKind.DWCONV: MappingType.MANY_TO_MANY,
    OpKind.POOL: MappingType.MANY_TO_MANY,
    OpKind.GLOBAL_POOL: MappingType.MANY_TO_MANY,
    OpKind.LINEAR: MappingType.MANY_TO_MANY,
    OpKind.SOFTMAX: MappingType.MANY_TO_MANY,
    OpKind.NORM: MappingType.MANY_TO_MANY,
    OpKind.MATMUL: MappingType.MANY_TO_MANY,
    OpKind.OPAQUE: MappingType.MANY_TO_MANY,
    OpKind.ELTWISE_UNARY: MappingType.ONE_TO_ONE,
    OpKind.ELTWISE_BINARY: MappingType.ONE_TO_ONE,
    OpKind.BATCHNORM: MappingType.ONE_TO_ONE,
    OpKind.CONCAT: MappingType.ONE_TO_ONE,
    OpKind.SLICE: MappingType.ONE_TO_ONE,
    OpKind.PAD: MappingType.ONE_TO_ONE,
    OpKind.RESIZE: MappingType.ONE_TO_MANY,
    OpKind.RESHAPE: MappingType.REORGANIZE,
    OpKind.TRANSPOSE: MappingType.SHUFFLE,
}


def default_mapping(kind: OpKind, input_shapes: Sequence[Shape],
                    output_shape: Shape) -> MappingType:
    """DNNFusion mapping type of an op of `kind`.

    An elementwise op with a broadcast operand (the squeeze-and-excitation multiply) maps one
    input element to many outputs; DNNFusion types a multi-input op by its most complex pair.
    """
    mapping = _KIND_MAPPING[kind]
    if kind is OpKind.ELTWISE_BINARY and any(
        math.prod(s) < math.prod(output_shape) for s in input_shapes
    ):
        return MappingType.ONE_TO_MANY
    return mapping


def input_ref(k: int) -> int:
    """The reference an op uses for network input `k`."""
    return -(k + 1)


def is_network_input(ref: int) -> bool:
    """True if an op input reference names a network input rather than an op."""
    return ref < 0


def network_input_index(ref: int) -> int:
    """Index of the network input a negative reference names."""
    return -ref - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class OpFields:
    """The fields every op has, whether its inputs are numbered (`Op`) or still named
    (`simulator.workload.builder.OpSpec`): keyword-only, with their defaults.

    Attributes:
        kernel, stride, dilation: (height, width) window parameters; (1, 1) when not windowed.
        padding: (top, left, bottom, right).
        groups: Convolution groups (1 otherwise).
        weight_elems: Parameter elements after BatchNorm folding (weights plus bias).
        macs: Multiply-accumulates of one inference.
        attrs: Extra attributes as sorted (key, value) pairs (e.g. resize mode, ceil_mode).
    """

    kernel: tuple[int, int] = (1, 1)
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    weight_elems: int = 0
    macs: int = 0
    attrs: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Op(OpFields):
    """One operation of a `ComputeGraph` (the fields of `OpFields` too).

    Attributes:
        id: Position in the graph's topological numbering.
        name: Unique name (module path for torch, node name for ONNX).
        kind: Coarse class used by the cost models.
        op_type: Specific function, lower case ("relu", "hardswish", "add", "max", "flatten").
        inputs: Producer op ids, or `input_ref(k)` for network input k, in argument order.
        input_shapes: Shape of each input, aligned with `inputs`.
        output_shape: Shape of the single output tensor.
        mapping: DNNFusion mapping type (keyword-only).
    """

    id: int
    name: str
    kind: OpKind
    op_type: str
    inputs: tuple[int, ...]
    input_shapes: tuple[Shape, ...]
    output_shape: Shape
    mapping: MappingType = field(default=MappingType.ONE_TO_ONE, kw_only=True)

    @property
    def output_elems(self) -> int:
        """Elements of the output tensor."""
        return math.prod(self.output_shape)

    @property
    def weight_reads(self) -> int:
        """Weight elements one run of the op reads: `weight_elems`, except for an embedding
        (op_type ``embedding``), which reads only the table rows its token ids select, one row
        of D per id (the output's elements), never the whole table (docs/cost-model.md,
        section 9.8)."""
        if self.op_type == "embedding" and self.kind is OpKind.LINEAR:
            return self.output_elems
        return self.weight_elems

    def attr(self, key: str, default: Any = None) -> Any:
        """Value of extra attribute `key`, or `default`."""
        return dict(self.attrs).get(key, default)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with the stable keys documented in the README."""
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind.value,
            "op_type": self.op_type,
            "inputs": list(self.inputs),
            "input_shapes": [list(s) for s in self.input_shapes],
            "output_shape": list(self.output_shape),
            "kernel": list(self.kernel),
            "stride": list(self.stride),
            "padding": list(self.padding),
            "dilation": list(self.dilation),
            "groups": self.groups,
            "weight_elems": self.weight_elems,
            "macs": self.macs,
            "mapping": self.mapping.value,
            "attrs": {k: v for k, v in self.attrs},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Op:
        """Inverse of `to_dict`, strict: every field of the type `to_dict` writes and within
        its range (`_DocReader`); refuses negative or zero sizes (`GraphError`)."""
        return _DocReader().op(d, 0)


def _checked(op: Op) -> Op:
    """`op` unless a document gave it sizes no network has (a graph JSON is user input)."""
    shapes = (*op.input_shapes, op.output_shape)
    problems = [
        (any(d <= 0 for s in shapes for d in s), "a tensor dimension that is not positive"),
        (op.weight_elems < 0 or op.macs < 0, "negative weights or MACs"),
        (min(*op.kernel, *op.stride, *op.dilation, op.groups) < 1,
         "a kernel, stride, dilation or groups below 1"),
        (min(op.padding) < 0, "negative padding"),
    ]
    for bad, what in problems:
        if bad:
            raise GraphError(f"op {op.name[:60]!r} has {what}")
    return op


def _pair(v: Sequence[int]) -> tuple[int, int]:
    a, b = v
    return int(a), int(b)


FLOAT32_MAX = 3.4028234663852886e38
"""float32's largest finite value: what an infinite attribute becomes."""


def freeze_attrs(attrs: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Attributes as a sorted tuple of pairs, lists turned into tuples at every depth
    (hashable, comparable), an infinite float (a pad or fill value of -inf, as TF-"same" max
    pooling pads) as float32's largest finite value of its sign, which acts the same on
    float32 activations: the graph document holds finite numbers only, so every importer's
    graph round-trips through JSON."""
    return tuple(sorted((str(k), _frozen(v)) for k, v in attrs.items()))


def _frozen(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return math.copysign(FLOAT32_MAX, value)
    return tuple(_frozen(v) for v in value) if isinstance(value, (list, tuple)) else value


_OP_KEYS = frozenset({"id", "name", "kind", "op_type", "inputs", "input_shapes",
                      "output_shape", "kernel", "stride", "padding", "dilation", "groups",
                      "weight_elems", "macs", "mapping", "attrs"})
_DOC_KEYS = frozenset({"format", "version", "name", "inputs", "outputs", "ops"})
_MAX_COUNT = 2**62  # weights or MACs of one op
_MAX_TEXT = 1024  # characters of a name or an attribute string
_MAX_RANK = 8


class _DocReader:
    """Strict reader of a graph document (`ComputeGraph.from_dict`): every value has the JSON
    type `to_dict` writes (no coercion: ``111.5``, ``true``, ``null`` or ``"3"`` where an
    integer belongs are refused, and so is a float where text belongs), every number lies in
    its range (dimensions 1 to `limits.MAX_DIM`, a tensor at most `limits.MAX_TENSOR_ELEMS`
    elements, counts at most 2^62), unknown keys are refused; each refusal is one
    `GraphError` naming the op and the key."""

    def __init__(self) -> None:
        self.where = "malformed graph document"

    def fail(self, what: str) -> GraphError:
        return GraphError(f"{self.where}: {what}")

    def mapping(self, value: Any, what: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(f"{what} must be an object, got {_shown(value)}")
        return value

    def get(self, d: Mapping[str, Any], key: str) -> Any:
        if key not in d:
            raise self.fail(f"missing key {key!r}")
        return d[key]

    def integer(self, value: Any, what: str, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{what} must be an integer, got {_shown(value)}")
        if not lo <= value <= hi:
            raise self.fail(f"{what} = {_shown(value)} is outside {lo:,}..{hi:,}")
        return value

    def text(self, value: Any, what: str) -> str:
        if not isinstance(value, str):
            raise self.fail(f"{what} must be text, got {_shown(value)}")
        if len(value) > _MAX_TEXT:
            raise self.fail(f"{what} is longer than {_MAX_TEXT} characters")
        return value

    def items(self, value: Any, what: str, count: int | None = None,
              most: int | None = None) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(f"{what} must be a list, got {_shown(value)}")
        if count is not None and len(value) != count:
            raise self.fail(f"{what} must have {count} values, got {len(value)}")
        if most is not None and len(value) > most:
            raise self.fail(f"{what} has {len(value):,} values; at most {most:,}")
        return value

    def shape(self, value: Any, what: str) -> Shape:
        from simulator.limits import MAX_DIM, MAX_TENSOR_ELEMS

        dims = self.items(value, what, most=_MAX_RANK)
        out = tuple(self.integer(d, f"{what}[{k}]", 1, MAX_DIM) for k, d in enumerate(dims))
        if math.prod(out) > MAX_TENSOR_ELEMS:
            raise self.fail(f"{what} {list(out)} has {math.prod(out):,} elements; at most "
                            f"{MAX_TENSOR_ELEMS:,} (docs/limits.md)")
        return out

    def ints(self, value: Any, what: str, count: int, lo: int, hi: int) -> tuple[int, ...]:
        return tuple(self.integer(v, f"{what}[{k}]", lo, hi)
                     for k, v in enumerate(self.items(value, what, count)))

    def enum(self, value: Any, what: str, kind: type[StrEnum]) -> Any:
        text = self.text(value, what)
        try:
            return kind(text)
        except ValueError:
            choices = ", ".join(m.value for m in kind)
            raise self.fail(f"{what} {_shown(text)} is not one of {choices}") from None

    def attr(self, value: Any, what: str, depth: int = 0) -> Any:
        if value is None or isinstance(value, (bool, int)):
            return self.integer(value, what, -_MAX_COUNT, _MAX_COUNT) \
                if isinstance(value, int) and not isinstance(value, bool) else value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise self.fail(f"{what} is not a finite number")
            return value
        if isinstance(value, str):
            return self.text(value, what)
        if isinstance(value, list) and depth < 2:
            return tuple(self.attr(v, f"{what}[{k}]", depth + 1)
                         for k, v in enumerate(self.items(value, what, most=4096)))
        raise self.fail(f"{what} must be a number, text or a list of them, got "
                        f"{_shown(value)}")

    def op(self, d: Any, index: int) -> Op:
        from simulator.limits import MAX_DIM

        d = self.mapping(d, f"op {index}")
        self.where = f"malformed graph document: op {index}"
        name = self.text(self.get(d, "name"), "name")
        self.where = f"malformed graph document: op {index} {_shown(name)}"
        unknown = sorted(set(d) - _OP_KEYS)
        if unknown:
            raise self.fail(f"unknown key {_shown(unknown[0])}")
        inputs = self.items(self.get(d, "inputs"), "inputs", most=100_000)
        op = Op(
            id=self.integer(self.get(d, "id"), "id", 0, 2**31),
            name=name,
            kind=self.enum(self.get(d, "kind"), "kind", OpKind),
            op_type=self.text(self.get(d, "op_type"), "op_type"),
            inputs=tuple(self.integer(r, f"inputs[{k}]", -2**31, 2**31)
                         for k, r in enumerate(inputs)),
            input_shapes=tuple(self.shape(s, f"input_shapes[{k}]") for k, s in
                               enumerate(self.items(self.get(d, "input_shapes"),
                                                    "input_shapes", most=100_000))),
            output_shape=self.shape(self.get(d, "output_shape"), "output_shape"),
            kernel=self.ints(d.get("kernel", [1, 1]), "kernel", 2, 1, MAX_DIM),
            stride=self.ints(d.get("stride", [1, 1]), "stride", 2, 1, MAX_DIM),
            padding=self.ints(d.get("padding", [0, 0, 0, 0]), "padding", 4, 0, MAX_DIM),
            dilation=self.ints(d.get("dilation", [1, 1]), "dilation", 2, 1, MAX_DIM),
            groups=self.integer(d.get("groups", 1), "groups", 1, MAX_DIM),
            weight_elems=self.integer(d.get("weight_elems", 0), "weight_elems", 0, _MAX_COUNT),
            macs=self.integer(d.get("macs", 0), "macs", 0, _MAX_COUNT),
            mapping=self.enum(self.get(d, "mapping"), "mapping", MappingType),
            attrs=freeze_attrs({self.text(k, "an attribute name"): self.attr(v, f"attrs.{k}")
                                for k, v in self.mapping(d.get("attrs", {}),
                                                         "attrs").items()}),
        )
        self.where = "malformed graph document"
        return _checked(op)

    def graph(self, d: Any) -> dict[str, Any]:
        d = self.mapping(d, "the document")
        fmt = d.get("format")
        if fmt != GRAPH_FORMAT:
            raise GraphError(f"not a fusion-dse graph document (format={_shown(fmt)})")
        version = d.get("version")
        if type(version) is not int or version != GRAPH_FORMAT_VERSION:
            raise GraphError(f"unsupported graph format version {_shown(version)}")
        unknown = sorted(set(d) - _DOC_KEYS)
        if unknown:
            raise self.fail(f"unknown key {_shown(unknown[0])}")
        inputs = [self.mapping(i, f"inputs[{k}]") for k, i in
                  enumerate(self.items(self.get(d, "inputs"), "inputs", most=1024))]
        ops = self.items(self.get(d, "ops"), "ops", most=10_000_000)
        return {
            "name": self.text(self.get(d, "name"), "name"),
            "ops": tuple(self.op(o, k) for k, o in enumerate(ops)),
            "input_shapes": tuple(self.shape(self.get(i, "shape"), f"inputs[{k}].shape")
                                  for k, i in enumerate(inputs)),
            "outputs": tuple(self.integer(o, f"outputs[{k}]", 0, 2**31) for k, o in
                             enumerate(self.items(self.get(d, "outputs"), "outputs",
                                                  most=10_000_000))),
            "input_names": tuple(self.text(self.get(i, "name"), f"inputs[{k}].name")
                                 for k, i in enumerate(inputs)),
        }


def _shown(value: Any) -> str:
    from simulator.limits import shown

    return shown(value, 40)


class _Equal:
    """A class of graphs found equal (union-find: its root stands for the class)."""

    __slots__ = ("parent",)

    def __init__(self) -> None:
        self.parent = self

    def root(self) -> _Equal:
        node = self
        while node.parent is not node:
            node.parent = node.parent.parent
            node = node.parent
        return node


@dataclass(frozen=True)
class ComputeGraph:
    """An immutable DAG of ops in topological numbering.

    Construct with validated parts (see `check`); importers build through
    `simulator.workload.builder.GraphBuilder`, which sorts and numbers arbitrary node lists.

    Attributes:
        name: Network name.
        ops: The ops; ``ops[i].id == i``.
        input_shapes: Shapes of the network inputs.
        outputs: Ids of the ops whose tensors are network outputs.
        input_names: Names of the network inputs.
    """

    name: str
    ops: tuple[Op, ...]
    input_shapes: tuple[Shape, ...]
    outputs: tuple[int, ...]
    input_names: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.input_names:
            names = tuple(f"input{k}" for k in range(len(self.input_shapes)))
            object.__setattr__(self, "input_names", names)
        self.check()

    def check(self) -> None:
        """Raise `GraphError` unless every IR invariant holds."""
        if not self.ops:
            raise GraphError(f"graph {self.name!r} has no operations")
        names: set[str] = set()
        for i, op in enumerate(self.ops):
            if op.id != i:
                raise GraphError(f"op {op.name!r} has id {op.id}, expected {i}")
            if op.name in names:
                raise GraphError(f"duplicate op name {op.name!r} in graph {self.name!r}")
            names.add(op.name)
            self._check_inputs(op)
        for o in self.outputs:
            if not 0 <= o < len(self.ops):
                raise GraphError(f"network output {o} is not an op of graph {self.name!r}")

    def _check_inputs(self, op: Op) -> None:
        if len(op.inputs) != len(op.input_shapes):
            raise GraphError(f"op {op.name!r}: {len(op.inputs)} inputs but "
                             f"{len(op.input_shapes)} input shapes")
        for ref, shape in zip(op.inputs, op.input_shapes, strict=True):
            if is_network_input(ref):
                k = network_input_index(ref)
                if k >= len(self.input_shapes):
                    raise GraphError(f"op {op.name!r} reads network input {k}, "
                                     "which does not exist")
                expected = self.input_shapes[k]
            elif ref >= op.id:
                raise GraphError(f"op {op.name!r} (id {op.id}) reads op {ref}: edges must go "
                                 "from a lower to a higher id")
            else:
                expected = self.ops[ref].output_shape
            if tuple(shape) != tuple(expected):
                raise GraphError(f"op {op.name!r}: input shape {tuple(shape)} does not match "
                                 f"the producer's output shape {tuple(expected)}")

    def __hash__(self) -> int:
        return self._hash

    @cached_property
    def _hash(self) -> int:  # graphs key the cost-model caches: hash the big tuple once
        return hash(self._key)

    @property
    def _key(self) -> tuple:
        return self.name, self.ops, self.input_shapes, self.outputs, self.input_names

    def __eq__(self, other: object) -> bool:
        """Equal content. Graphs key the cost models' caches, so an equal graph built again
        (a graph stage re-run, a sweep's next point) is compared at every cache lookup: the
        ops are compared once, and graphs found equal join one class (`_same`) that answers
        every later comparison at once."""
        if self is other:
            return True
        if not isinstance(other, ComputeGraph):
            return NotImplemented
        mine, theirs = self._same.root(), other._same.root()
        if mine is theirs:
            return True
        if self._hash != other._hash or self._key != other._key:
            return False
        theirs.parent = mine
        return True

    @cached_property
    def _same(self) -> _Equal:
        return _Equal()

    def __getstate__(self) -> dict[str, Any]:
        """The fields alone: the cached properties stay behind (a string's hash differs from
        one process to the next, so a cached `_hash` must not travel to a Dask worker)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    # --- basic access -------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __getitem__(self, op_id: int) -> Op:
        return self.ops[op_id]

    @cached_property
    def _name_index(self) -> dict[str, int]:
        return {op.name: op.id for op in self.ops}

    def id_of(self, name: str) -> int:
        """Id of the op called `name` (KeyError if there is none)."""
        return self._name_index[name]

    @cached_property
    def _preds(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(sorted({r for r in op.inputs if r >= 0})) for op in self.ops)

    @cached_property
    def _succs(self) -> tuple[tuple[int, ...], ...]:
        succs: list[set[int]] = [set() for _ in self.ops]
        for op in self.ops:
            for r in op.inputs:
                if r >= 0:
                    succs[r].add(op.id)
        return tuple(tuple(sorted(s)) for s in succs)

    def predecessors(self, op_id: int) -> tuple[int, ...]:
        """Distinct producer ops of `op_id`, ascending (network inputs excluded)."""
        return self._preds[op_id]

    def successors(self, op_id: int) -> tuple[int, ...]:
        """Distinct consumer ops of `op_id`, ascending."""
        return self._succs[op_id]

    @cached_property
    def output_set(self) -> frozenset[int]:
        """Ids of ops whose output is a network output."""
        return frozenset(self.outputs)

    def edges(self) -> list[tuple[int, int]]:
        """Op-to-op edges (i, j), i < j, one per distinct producer/consumer pair."""
        return [(p, op.id) for op in self.ops for p in self._preds[op.id]]

    @cached_property
    def nx(self) -> nx.DiGraph:
        """A frozen networkx view: nodes are op ids with attribute ``op``."""
        g = nx.DiGraph(name=self.name)
        g.add_nodes_from((op.id, {"op": op}) for op in self.ops)
        g.add_edges_from(self.edges())
        return nx.freeze(g)

    def tensor_shape(self, ref: int) -> Shape:
        """Shape of the tensor an input reference names (an op output or a network input)."""
        if is_network_input(ref):
            return self.input_shapes[network_input_index(ref)]
        return self.ops[ref].output_shape

    def tensor_elems(self, ref: int) -> int:
        """Elements of the tensor an input reference names."""
        return math.prod(self.tensor_shape(ref))

    # --- node sets ------------------------------------------------------------------------

    def _as_set(self, nodes: Iterable[int]) -> frozenset[int]:
        s = frozenset(nodes)
        bad = [n for n in s if not 0 <= n < len(self.ops)]
        if bad:
            raise GraphError(f"op ids {sorted(bad)} are not in graph {self.name!r}")
        return s

    def inputs_of(self, nodes: Iterable[int]) -> tuple[int, ...]:
        """Tensors entering a node set: distinct references (ops outside, or network inputs).

        Sorted with network inputs first, then producer ids ascending.
        """
        s = self._as_set(nodes)
        refs = {r for n in s for r in self.ops[n].inputs if r not in s}
        return tuple(sorted(refs))

    def outputs_of(self, nodes: Iterable[int]) -> tuple[int, ...]:
        """Ops of a node set whose tensor leaves it: consumed outside, or a network output."""
        s = self._as_set(nodes)
        return tuple(
            n for n in sorted(s)
            if n in self.output_set or any(c not in s for c in self._succs[n])
        )

    def internal_edges(self, nodes: Iterable[int]) -> list[tuple[int, int]]:
        """Op-to-op edges with both ends in the node set."""
        s = self._as_set(nodes)
        return [(p, n) for n in sorted(s) for p in self._preds[n] if p in s]

    def is_weakly_connected(self, nodes: Iterable[int]) -> bool:
        """True if the node set is non-empty and connected ignoring edge direction."""
        s = self._as_set(nodes)
        if not s:
            return False
        start = next(iter(s))
        seen, stack = {start}, [start]
        while stack:
            n = stack.pop()
            for m in (*self._preds[n], *self._succs[n]):
                if m in s and m not in seen:
                    seen.add(m)
                    stack.append(m)
        return len(seen) == len(s)

    def subgraph(self, nodes: Iterable[int], name: str | None = None) -> ComputeGraph:
        """The induced subgraph of a node set as a graph of its own, renumbered in order.

        Tensors entering the set become network inputs (in `inputs_of` order); ops whose tensor
        leaves the set become network outputs.
        """
        s = self._as_set(nodes)
        if not s:
            raise GraphError("cannot take the subgraph of an empty node set")
        order = sorted(s)
        new_id = {old: i for i, old in enumerate(order)}
        entering = self.inputs_of(s)
        new_ref = {ref: input_ref(k) for k, ref in enumerate(entering)}
        new_ref.update(new_id)
        ops = tuple(
            replace(self.ops[old], id=i, inputs=tuple(new_ref[r] for r in self.ops[old].inputs))
            for i, old in enumerate(order)
        )
        return ComputeGraph(
            name=name or f"{self.name}[{len(order)} ops]",
            ops=ops,
            input_shapes=tuple(self.tensor_shape(r) for r in entering),
            outputs=tuple(new_id[o] for o in self.outputs_of(s)),
            input_names=tuple(self._ref_name(r) for r in entering),
        )

    def _ref_name(self, ref: int) -> str:
        if is_network_input(ref):
            return self.input_names[network_input_index(ref)]
        return self.ops[ref].name

    # --- totals ---------------------------------------------------------------------------

    @property
    def total_weights(self) -> int:
        """Parameter elements over all ops."""
        return sum(op.weight_elems for op in self.ops)

    @property
    def total_macs(self) -> int:
        """Multiply-accumulates over all ops."""
        return sum(op.macs for op in self.ops)

    @property
    def activation_elems(self) -> int:
        """Elements of every activation tensor: network inputs plus every op output."""
        return sum(math.prod(s) for s in self.input_shapes) + sum(o.output_elems for o in self.ops)

    def count(self, *kinds: OpKind) -> int:
        """Number of ops of the given kinds."""
        return sum(op.kind in kinds for op in self.ops)

    # --- serialisation --------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (format ``fusion-dse.graph`` version 1)."""
        return {
            "format": GRAPH_FORMAT,
            "version": GRAPH_FORMAT_VERSION,
            "name": self.name,
            "inputs": [{"name": n, "shape": list(s)}
                       for n, s in zip(self.input_names, self.input_shapes, strict=True)],
            "outputs": list(self.outputs),
            "ops": [op.to_dict() for op in self.ops],
        }

    def to_json(self, indent: int | None = None) -> str:
        """The graph as a JSON string."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ComputeGraph:
        """Inverse of `to_dict`; raises `GraphError` on a malformed document: read strictly
        (`_DocReader`: no value of another type is coerced, every number in its range)."""
        return cls(**_DocReader().graph(d))

    @classmethod
    def from_json(cls, text: str) -> ComputeGraph:
        """Parse a graph from the JSON `to_json` writes (numbers out of range refused,
        `simulator.limits.load_json_text`)."""
        from simulator.limits import load_json_text

        return cls.from_dict(load_json_text(text, "graph JSON", GraphError))

    def __repr__(self) -> str:
        return (f"ComputeGraph({self.name!r}, {len(self.ops)} ops, "
                f"{self.total_weights:,} weights, {self.total_macs:,} MACs)")

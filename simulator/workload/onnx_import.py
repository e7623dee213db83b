"""ONNX front end: an ONNX model file imported as a `ComputeGraph`.

The importer loads the model (external-data files included), fixes the input dimensions, runs ONNX
shape inference and walks the nodes in topological order. Initializers, Constant nodes and every
value computed only from constants or tensor shapes are constants, not ops. Each remaining node
becomes one op named after the node, except aliases (Identity, Dropout, Cast, identity pooling
windows, same-shape reshapes), a BatchNormalization folded into the convolution it follows, and
the gates ``Mul(x, Sigmoid(x))`` and ``Mul(x, HardSigmoid(x))`` that exporters emit for SiLU and
Hardswish, which become one ``silu`` / ``hardswish`` op as `from_torch` produces them, and the
``Reshape -> Transpose -> Reshape`` of a channel shuffle, which becomes one ``channel_shuffle``
op, and torch's exported GroupNorm (``Reshape -> InstanceNormalization -> Reshape -> Mul ->
Add``), which becomes one ``groupnorm`` op. The dynamo exporter's safe softmax
``Where(IsNaN(Softmax(x)), 0, Softmax(x))`` is the softmax alone (`_safe_softmax`: exact but for
a fully masked row); any other IsNaN of an activation is refused. Values computed from constants
and static shapes are evaluated (`_fold`) so that they can be operands, and shape inference runs
again with them when it left tensors without a static shape.

Shape inference runs on a light copy of the model (nodes sorted, inputs fixed, large weights
reduced to their dimensions), so its cost does not grow with the weights and models over
protobuf's 2 GB limit (stored with external data) import too.

The file is untrusted input (docs/limits.md): its opset must lie between `MIN_OPSET` and the
newest the installed onnx knows; every initializer's (and Constant's) declared size is checked
against the data it holds, external data included (a file inside the model's folder, offset
and length inside that file) before anything is read; declared input shapes obey the input
limits; a constant is folded only when its size is known beforehand and within
`limits.MAX_FOLD_ELEMS` (all large folds together too), so a small model cannot make the
importer materialise gigabytes (ConstantOfShape, Range, Expand, Tile, a broadcast); every
op's tensor is checked against `limits.MAX_TENSOR_ELEMS` and refused with a zero dimension,
and a Reshape must keep its element count.
"""

from __future__ import annotations

import math
import operator
import os
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import helper, numpy_helper, shape_inference

from simulator import limits
from simulator.workload.builder import GraphBuilder, OpSpec
from simulator.workload.errors import (
    GraphError,
    InputShapeError,
    ModelFileError,
    UnsupportedOpError,
)
from simulator.workload.graph import ComputeGraph, MappingType, OpKind, Shape, freeze_attrs
from simulator.workload.ops import (
    ACTIVATIONS,
    conv_kind,
    conv_macs,
    is_identity_window,
    linear_macs,
    matmul_macs,
)

__all__ = ["from_onnx", "from_onnx_with_params"]

MIN_OPSET = 11
_STUB_ELEMS = 1024  # shape inference sees larger initializers as dimensions only
_DEFAULT_DOMAINS = ("", "ai.onnx")
_SHAPE_OPS = frozenset({"Shape", "Size"})  # their output depends on shapes only, never on data
_ConstSource = onnx.TensorProto | onnx.AttributeProto | None  # where a constant's value is kept


class _Unsupported(Exception):
    """A node the importer cannot represent exactly; the message says why (may be empty)."""


def from_onnx(path: str | os.PathLike[str], input_shape: Sequence[int] | None = None, *,
              fold_bn: bool = True, allow_opaque: bool = False,
              name: str | None = None) -> ComputeGraph:
    """Import an ONNX model file as a `ComputeGraph`.

    Args:
        path: The ``.onnx`` file; external-data files must lie where the model names them.
        input_shape: Shape of the first network input, e.g. ``(1, 3, 224, 224)``. Required when
            that input has symbolic dimensions other than the batch (a symbolic batch alone
            defaults to 1); when the input is static it must match.
        fold_bn: Fold a BatchNormalization into the convolution it follows when the convolution
            has no other consumer.
        allow_opaque: Import unsupported nodes as OPAQUE ops (with a warning) instead of
            raising `UnsupportedOpError`.
        name: Graph name (defaults to the file name without its suffix).

    Returns:
        The imported graph; op names are the ONNX node names, input names the ONNX input names.

    Raises:
        ModelFileError: The file is missing, unreadable, corrupt, of opset < 11, or shapes
            cannot be inferred.
        InputShapeError: `input_shape` is malformed or does not fit the model's input.
        UnsupportedOpError: A node has no IR equivalent and `allow_opaque` is false.
        GraphError: The graph has a cycle or breaks another IR invariant.
    """
    return _import(path, input_shape, fold_bn, allow_opaque, name, with_params=False)[0]


def from_onnx_with_params(path: str | os.PathLike[str], input_shape: Sequence[int] | None = None,
                          *, fold_bn: bool = True, allow_opaque: bool = False,
                          name: str | None = None) -> tuple[ComputeGraph, dict[str, Any]]:
    """Import an ONNX model file with its initializers as the ops' parameters.

    Takes the arguments of `from_onnx`; the parameters are float32 torch tensors keyed by op
    name in the format of `simulator.workload.execute` (a folded BatchNormalization folded into
    the convolution's weights and bias, Gemm's alpha, beta and transB applied, MatMul's matrix
    transposed), so that ``execute(graph, params, x)`` reproduces the model. A parameter whose
    value the file computes rather than stores is absent (executing that op then fails).
    """
    return _import(path, input_shape, fold_bn, allow_opaque, name, with_params=True)


def _import(path: str | os.PathLike[str], input_shape: Sequence[int] | None, fold_bn: bool,
            allow_opaque: bool, name: str | None, *,
            with_params: bool) -> tuple[ComputeGraph, dict[str, Any]]:
    where = str(path)
    wanted = None if input_shape is None else _check_input_shape(input_shape)
    model = _load(where)
    order = _node_order(model.graph, where)
    inputs = _resolve_inputs(model.graph, wanted, where)
    graph = _shaped_graph(model, order, inputs, where)
    walk = _start_walk(graph, model.graph.initializer, inputs, where, fold_bn=fold_bn,
                       allow_opaque=allow_opaque)
    walk.opset = _opset(model)
    walk.params = {} if with_params else None
    for node in graph.node:
        _visit(walk, node)
    result = _build(walk, name or Path(where).stem, inputs, [o.name for o in graph.output])
    if walk.opaque:
        warnings.warn(f"ONNX model {where}: {len(walk.opaque)} unsupported op(s) imported as "
                      f"opaque ops without MACs: {', '.join(walk.opaque)}", stacklevel=3)
    return result, _torch_params(walk.params or {}, result)


def _torch_params(params: Mapping[str, Mapping[str, np.ndarray]],
                  graph: ComputeGraph) -> dict[str, Any]:
    import torch

    names = {op.name for op in graph.ops}
    return {op: {k: torch.from_numpy(np.array(v, dtype=np.float32, copy=True))
                 for k, v in tensors.items()}
            for op, tensors in params.items() if op in names and tensors}


# --- loading and validation ------------------------------------------------------------------


def _check_input_shape(shape: Sequence[int] | str) -> Shape:
    try:
        if isinstance(shape, str):
            dims = tuple(int(d) for d in shape.replace("x", ",").split(","))
        else:
            dims = tuple(operator.index(d) for d in shape)
    except (TypeError, ValueError) as err:
        raise InputShapeError(f"input shape {shape!r} is not a sequence of integers "
                              "(expected N,C,H,W such as 1,3,224,224)") from err
    if not dims or any(d <= 0 for d in dims):
        raise InputShapeError(f"input shape {shape!r} must have positive dimensions")
    return limits.check_input_size(dims, str(shape), InputShapeError)


def _load(where: str) -> onnx.ModelProto:
    """The model of the file at `where`, checked before its external data is read: opset
    (`_check_opset`), every tensor's declared size against its data (`_check_tensors`)."""
    if not os.path.isfile(where):
        raise ModelFileError(f"ONNX model file {where} does not exist or is not a file")
    if os.path.getsize(where) > limits.MAX_FILE_BYTES["onnx"]:
        raise ModelFileError(f"ONNX model file {where} is over "
                             f"{limits.MAX_FILE_BYTES['onnx']:,} bytes")
    try:
        model = onnx.load(where, load_external_data=False)
    except DecodeError as err:
        raise ModelFileError(f"{where} is not a valid ONNX model: the protobuf cannot be "
                             f"parsed ({_first_line(err)})") from err
    except OSError as err:
        raise ModelFileError(f"ONNX model {where} cannot be read: "
                             f"{err.strerror or err}: {err.filename or where}") from err
    if not model.HasField("graph") or not model.graph.node:
        raise ModelFileError(f"{where} is empty or not an ONNX model (it has no graph nodes)")
    _check_opset(model, where)
    external = _check_tensors(model, where)
    if external:
        from onnx.external_data_helper import load_external_data_for_model

        try:
            load_external_data_for_model(model, os.path.dirname(os.path.abspath(where)))
        except (onnx.checker.ValidationError, ValueError) as err:
            raise ModelFileError(f"ONNX model {where}: its external data cannot be loaded: "
                                 f"{_first_line(err)}") from err
        except OSError as err:
            raise ModelFileError(f"ONNX model {where}: its external data cannot be read: "
                                 f"{err.strerror or err}: {err.filename or where}") from err
    return model


def _model_tensors(model: onnx.ModelProto) -> Iterator[tuple[onnx.TensorProto, str]]:
    """Every tensor the top-level graph stores: initializers and Constant values."""
    for t in model.graph.initializer:
        yield t, f"initializer {limits.shown(t.name, 60)}"
    for t in model.graph.sparse_initializer:
        yield t.values, f"sparse initializer {limits.shown(t.values.name, 60)}"
    for node in model.graph.node:
        if node.op_type == "Constant" and node.domain in _DEFAULT_DOMAINS:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    yield a.t, f"Constant node {limits.shown(_label(node), 60)}"


def _check_tensors(model: onnx.ModelProto, where: str) -> bool:
    """Refuse a tensor whose declared dimensions disagree with the data it holds (none, too
    little, too much; external data outside the model's folder, or past the end of its
    file); returns whether any tensor keeps its data in an external file."""
    folder = os.path.dirname(os.path.abspath(where))
    external = False
    for tensor, what in _model_tensors(model):
        dims = tuple(tensor.dims)
        if any(d < 0 for d in dims):
            raise ModelFileError(f"ONNX model {where}: {what} has a negative dimension {dims}")
        elems = math.prod(dims)
        itemsize = _itemsize(tensor.data_type)
        if itemsize is None:
            continue  # strings and packed 4-bit types: sizes not fixed per element
        needed = elems * itemsize
        if needed > limits.MAX_FILE_BYTES["onnx"]:
            raise ModelFileError(f"ONNX model {where}: {what} declares {elems:,} elements "
                                 f"({'x'.join(map(str, dims))}), more than the file limit "
                                 "holds")
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            external = True
            _check_external(tensor, what, needed, folder, where)
            continue
        held = _held(tensor, itemsize)
        if held != needed:
            got = "no data" if held == 0 else f"{held:,} bytes of data"
            raise ModelFileError(f"ONNX model {where}: {what} declares {elems:,} elements "
                                 f"({'x'.join(map(str, dims)) or 'a scalar'}, {needed:,} "
                                 f"bytes) but holds {got}")
    return external


def _itemsize(data_type: int) -> int | None:
    if data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED) \
            or data_type in _PACKED_TYPES:
        return None
    try:
        return int(helper.tensor_dtype_to_np_dtype(data_type).itemsize)
    except (KeyError, TypeError, ValueError):
        return None


_PACKED_TYPES = frozenset(getattr(onnx.TensorProto, n) for n in
                          ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2")
                          if hasattr(onnx.TensorProto, n))


def _held(tensor: onnx.TensorProto, itemsize: int) -> int:
    """Bytes of data `tensor` holds in the file (raw, or its typed field counted in the
    element size of its type)."""
    if tensor.HasField("raw_data"):
        return len(tensor.raw_data)
    field_name = helper.tensor_dtype_to_field(tensor.data_type)
    values = len(getattr(tensor, field_name))
    complex_ = tensor.data_type in (onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128)
    return values * itemsize // 2 if complex_ else values * itemsize


def _check_external(tensor: onnx.TensorProto, what: str, needed: int, folder: str,
                    where: str) -> None:
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    path = os.path.realpath(os.path.join(folder, location))
    if not location or os.path.isabs(location) \
            or os.path.commonpath([path, os.path.realpath(folder)]) != os.path.realpath(folder):
        raise ModelFileError(f"ONNX model {where}: {what} keeps its external data in "
                             f"{limits.shown(location, 80)}, outside the model's folder")
    if not os.path.isfile(path):
        raise ModelFileError(f"ONNX model {where}: {what} keeps its external data in "
                             f"{limits.shown(location, 80)}, which is not a file there")
    try:
        offset = int(info.get("offset", "0"))
        length = int(info["length"]) if "length" in info else needed
    except ValueError:
        raise ModelFileError(f"ONNX model {where}: {what} has an external-data offset or "
                             "length that is not a number") from None
    size = os.path.getsize(path)
    if offset < 0 or length != needed or offset + length > size:
        raise ModelFileError(f"ONNX model {where}: {what} declares {needed:,} bytes at offset "
                             f"{offset:,} (length {length:,}) of "
                             f"{limits.shown(location, 80)}, a file of {size:,} bytes")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _opset(model: onnx.ModelProto) -> int:
    versions = [o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS]
    return int(versions[0]) if versions else MIN_OPSET


def _check_opset(model: onnx.ModelProto, where: str) -> None:
    """The model's ai.onnx opset lies between `MIN_OPSET` and the newest the installed onnx
    defines (a newer one names ops and attributes this importer cannot know)."""
    versions = [o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS]
    if not versions:
        raise ModelFileError(f"ONNX model {where} declares no ai.onnx opset")
    if len(set(versions)) > 1:
        raise ModelFileError(f"ONNX model {where} declares the ai.onnx opset twice "
                             f"({', '.join(map(str, versions))})")
    newest = onnx.defs.onnx_opset_version()
    if versions[0] < MIN_OPSET:
        raise ModelFileError(f"ONNX model {where} uses opset {versions[0]}, older than the "
                             f"oldest supported ({MIN_OPSET}); re-export it with a newer "
                             "opset or convert it with onnx.version_converter")
    if versions[0] > newest:
        raise ModelFileError(f"ONNX model {where} uses ai.onnx opset {versions[0]:,}, newer "
                             f"than the newest supported ({newest}, onnx {onnx.__version__})")


def _shape_model(model: onnx.ModelProto, order: Sequence[int],
                 inputs: Mapping[str, Shape]) -> onnx.ModelProto:
    """A light copy of `model` for shape inference.

    Its nodes are in `order`, its network inputs have the static `inputs` shapes, and
    initializers over `_STUB_ELEMS` elements keep only their dimensions: shape inference reads the
    values of small constants (shapes, axes) only.
    """
    source = model.graph
    graph = helper.make_graph(
        [source.node[k] for k in order], source.name,
        [_with_dims(v, inputs[v.name]) if v.name in inputs else v for v in source.input],
        list(source.output), [_stub(t) for t in source.initializer],
        value_info=list(source.value_info),
    )
    graph.sparse_initializer.extend(source.sparse_initializer)
    light = onnx.ModelProto(ir_version=model.ir_version, graph=graph)
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    return light


_SHAPE_PASSES = 4  # shape inference runs at most this often (constants folded in between)


def _shaped_graph(model: onnx.ModelProto, order: Sequence[int], inputs: Mapping[str, Shape],
                  where: str) -> onnx.GraphProto:
    """The light model's graph after shape inference (`_shape_model`).

    When some tensors are left without a static shape (a Reshape whose target is computed from
    ``Shape`` at run time, as torch's exporter writes attention), the constants that can be
    computed (`_fold`) replace the nodes computing them and inference runs again, while it
    gains shapes.
    """
    light = _shape_model(model, order, inputs)
    graph = _infer_shapes(light, where).graph
    for _ in range(_SHAPE_PASSES - 1):
        known = _static_shapes(graph)
        if all(o in known for n in graph.node for o in n.output if o):
            break
        w = _start_walk(graph, model.graph.initializer, inputs, where, fold_bn=False,
                        allow_opaque=True)
        w.opset = _opset(model)
        folded: dict[str, list[np.ndarray]] = {}
        for node in graph.node:
            if _is_constant_like(w, node):
                values = _record_constants(w, node)
                if values is not None and node.op_type != "Constant" \
                        and all(v.size <= _STUB_ELEMS for v in values):
                    folded[node.name or node.output[0]] = values
        if not folded:
            break
        light = _with_constants(light, folded)
        graph = _infer_shapes(light, where).graph
        if len(_static_shapes(graph)) <= len(known):
            break
    return graph


def _with_constants(model: onnx.ModelProto,
                    folded: Mapping[str, Sequence[np.ndarray]]) -> onnx.ModelProto:
    """`model` with each node named in `folded` replaced by Constant nodes of its values."""
    nodes = []
    for node in model.graph.node:
        values = folded.get(node.name or node.output[0])
        if values is None:
            nodes.append(node)
            continue
        nodes.extend(helper.make_node("Constant", [], [out], name=f"{_label(node)}:{k}",
                                      value=numpy_helper.from_array(np.asarray(v), out))
                     for k, (out, v) in enumerate(zip(node.output, values, strict=False))
                     if out)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def _with_dims(value: onnx.ValueInfoProto, dims: Shape) -> onnx.ValueInfoProto:
    fixed = onnx.ValueInfoProto()
    fixed.CopyFrom(value)
    shape = fixed.type.tensor_type.shape
    del shape.dim[:]
    for d in dims:
        shape.dim.add().dim_value = d
    return fixed


def _stub(tensor: onnx.TensorProto) -> onnx.TensorProto:
    if math.prod(tensor.dims) <= _STUB_ELEMS:
        return tensor
    return onnx.TensorProto(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims)


def _infer_shapes(model: onnx.ModelProto, where: str) -> onnx.ModelProto:
    try:
        return shape_inference.infer_shapes(model, check_type=False, strict_mode=False,
                                            data_prop=True)
    except (shape_inference.InferenceError, onnx.checker.ValidationError, ValueError,
            RuntimeError) as err:
        raise ModelFileError(f"ONNX model {where}: shape inference failed: "
                             f"{_first_line(err)}") from err


# --- node order --------------------------------------------------------------------------------


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def _outer_reads(graph: onnx.GraphProto) -> list[str]:
    """Names a (control-flow body) graph reads from enclosing scopes."""
    defined = ({v.name for v in graph.input} | {t.name for t in graph.initializer}
               | {o for n in graph.node for o in n.output})
    return [t for n in graph.node for t in _node_inputs(n) if t not in defined]


def _node_inputs(node: onnx.NodeProto) -> list[str]:
    """Distinct tensors a node reads: its inputs, then what its subgraphs read from outside."""
    implicit = [t for g in _subgraphs(node) for t in _outer_reads(g)]
    return list(dict.fromkeys([t for t in node.input if t] + implicit))


def _initializer_names(graph: onnx.GraphProto) -> set[str]:
    return {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}


def _label(node: onnx.NodeProto) -> str:
    return node.name or (node.output[0] if node.output else node.op_type)


def _node_order(graph: onnx.GraphProto, where: str) -> list[int]:
    """Node indices in a topological order (stable); raises `GraphError` naming a cycle."""
    available = {v.name for v in graph.input} | _initializer_names(graph)
    producer: dict[str, int] = {}
    for k, node in enumerate(graph.node):
        for out in filter(None, node.output):
            if out in producer or out in available:
                raise ModelFileError(f"ONNX model {where}: tensor '{out}' is produced twice "
                                     f"(again by node '{_label(node)}')")
            producer[out] = k
    g = nx.DiGraph()
    g.add_nodes_from(range(len(graph.node)))
    for k, node in enumerate(graph.node):
        for t in _node_inputs(node):
            if t in producer:
                g.add_edge(producer[t], k)
            elif t not in available and t in node.input:
                raise ModelFileError(f"ONNX model {where}: node '{_label(node)}' reads "
                                     f"tensor '{t}', which no node, input or initializer holds")
    try:
        return list(nx.lexicographical_topological_sort(g))
    except nx.NetworkXUnfeasible:
        cycle = [_label(graph.node[a]) for a, _ in nx.find_cycle(g)]
        raise GraphError(f"ONNX model {where} has a cycle: "
                         f"{' -> '.join([*cycle, cycle[0]])}") from None


# --- network inputs ----------------------------------------------------------------------------


Dims = tuple[int | str, ...]  # declared dims: an int when static, the symbol (or "?") otherwise


def _real_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are not initializers (old exporters list weights as inputs)."""
    weights = _initializer_names(graph)
    return [v for v in graph.input if v.name not in weights]


def _declared_dims(value: onnx.ValueInfoProto, where: str) -> Dims | None:
    if not value.type.HasField("tensor_type"):
        raise ModelFileError(f"ONNX model {where}: input '{value.name}' is not a tensor")
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0
                 else (d.dim_param or "?") for d in tensor.shape.dim)


def _dims_text(dims: Sequence[int | str]) -> str:
    return "(" + ", ".join(map(str, dims)) + ")"


def _resolve_inputs(graph: onnx.GraphProto, wanted: Shape | None,
                    where: str) -> dict[str, Shape]:
    """Static shape of every real network input, in graph order."""
    real = _real_inputs(graph)
    if not real:
        raise ModelFileError(f"ONNX model {where} has no inputs")
    first = _first_input_shape(real[0].name, _declared_dims(real[0], where), wanted, where)
    shapes = {real[0].name: first}
    for value in real[1:]:
        shapes[value.name] = _other_input_shape(value.name, _declared_dims(value, where),
                                                first[0], where)
    for name, shape in shapes.items():  # a declared shape obeys the limits of a given one
        try:
            limits.check_input_size(shape, ",".join(map(str, shape)), InputShapeError)
        except InputShapeError as err:
            raise InputShapeError(f"ONNX model {where}: input {limits.shown(name, 60)}: "
                                  f"{err}") from None
    return shapes


def _first_input_shape(name: str, dims: Dims | None, wanted: Shape | None, where: str) -> Shape:
    if wanted is not None:
        if dims is not None and (len(dims) != len(wanted) or any(
                isinstance(d, int) and d != w for d, w in zip(dims, wanted, strict=True))):
            raise InputShapeError(f"input shape {_dims_text(wanted)} does not match input "
                                  f"'{name}' of {where}, declared as {_dims_text(dims)}")
        return wanted
    if dims is None:
        raise InputShapeError(f"input '{name}' of {where} has no declared shape; "
                              "pass --input-shape")
    if all(isinstance(d, int) for d in dims[1:]):
        return tuple(d if isinstance(d, int) else 1 for d in dims)
    named = [d for d in dims if isinstance(d, str) and d != "?"]
    bind = f" (evaluate, simulate, optimize: or --bind {'=..,'.join(named)}=..)" if named else ""
    raise InputShapeError(f"input '{name}' of {where} has symbolic dimensions "
                          f"{_dims_text(dims)}; pass --input-shape{bind}")


def _other_input_shape(name: str, dims: Dims | None, batch: int, where: str) -> Shape:
    if dims is None or not all(isinstance(d, int) for d in dims[1:]):
        declared = "no declared shape" if dims is None else f"dimensions {_dims_text(dims)}"
        raise InputShapeError(f"input '{name}' of {where} has {declared}; only the first "
                              "input's shape can be set with --input-shape")
    return tuple(d if isinstance(d, int) else batch for d in dims)


# --- the walk ----------------------------------------------------------------------------------


@dataclass
class _Walk:
    """Mutable state of one import walk (private to `from_onnx`).

    Attributes:
        where: The model path, for messages.
        fold_bn, allow_opaque: The import options.
        shapes: Static shape of every tensor shape inference resolved (and every initializer).
        raw_uses: Readers of each ONNX tensor (node inputs plus graph outputs).
        consts: Constant tensors, with the proto holding their value when it is known.
        act: Activation tensor -> name of the network input or op that holds it.
        uses: Op or input name -> readers (after aliases and removals).
        specs: Ops so far, by name, in topological order.
        names: Names taken by inputs and ops.
        biasless: Convolutions without a bias (folding a BatchNorm adds one).
        gates: Ops that, multiplied by their own input, form a known activation.
        plain_norms: InstanceNormalization ops with the identity scale and bias (the middle
            of torch's exported GroupNorm).
        pattern_norms: GroupNorm ops made from that pattern, with the op types (Mul, Add) of
            the per-channel scale and bias folded into them so far.
        opaque: Descriptions of the nodes imported as opaque ops.
        opset: The model's ai.onnx opset.
        params: Parameter arrays per op name, when the caller asked for them (else None).
        shape_sources: Constant tensors computed from activations' shapes -> the ops or
            network inputs whose shapes they read (a resize's ``size_of``).
        folded: Elements of the large constants folded so far (at most
            `limits.MAX_FOLD_ELEMS` in all).
        nan_readers: The one node reading each IsNaN's output, when that is its only reader.
        safe_where: Where nodes' outputs found to be a safe softmax's, with the Softmax's
            output they stand for (`_safe_softmax`).
    """

    where: str
    fold_bn: bool
    allow_opaque: bool
    shapes: dict[str, Shape]
    raw_uses: Counter[str]
    consts: dict[str, _ConstSource]
    act: dict[str, str] = field(default_factory=dict)
    uses: Counter[str] = field(default_factory=Counter)
    specs: dict[str, OpSpec] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    biasless: set[str] = field(default_factory=set)
    gates: dict[str, str] = field(default_factory=dict)
    plain_norms: set[str] = field(default_factory=set)
    pattern_norms: dict[str, set[str]] = field(default_factory=dict)
    opaque: list[str] = field(default_factory=list)
    opset: int = MIN_OPSET
    params: dict[str, dict[str, np.ndarray]] | None = None
    shape_sources: dict[str, frozenset[str]] = field(default_factory=dict)
    folded: int = 0
    nan_readers: dict[str, onnx.NodeProto] = field(default_factory=dict)
    safe_where: dict[str, str] = field(default_factory=dict)


def _keep(w: _Walk, op_name: str, **arrays: np.ndarray | None) -> None:
    """Record parameter arrays of an op (when parameters are wanted and the values known)."""
    if w.params is None:
        return
    known = {k: np.asarray(v, dtype=np.float32) for k, v in arrays.items() if v is not None}
    if known:
        w.params.setdefault(op_name, {}).update(known)


def _static_shapes(graph: onnx.GraphProto) -> dict[str, Shape]:
    shapes = {t.name: tuple(int(d) for d in t.dims) for t in graph.initializer}
    shapes.update((t.values.name, tuple(int(d) for d in t.dims))
                  for t in graph.sparse_initializer)
    for value in (*graph.input, *graph.value_info, *graph.output):
        tensor = value.type.tensor_type
        if (value.type.HasField("tensor_type") and tensor.HasField("shape")
                and all(d.HasField("dim_value") for d in tensor.shape.dim)):
            shapes.setdefault(value.name, tuple(int(d.dim_value) for d in tensor.shape.dim))
    return shapes


def _reader_counts(graph: onnx.GraphProto) -> Counter[str]:
    counts = Counter(t for n in graph.node for t in n.input if t)
    counts.update(t for n in graph.node for g in _subgraphs(n) for t in set(_outer_reads(g)))
    counts.update(o.name for o in graph.output)
    return counts


def _start_walk(graph: onnx.GraphProto, initializers: Sequence[onnx.TensorProto],
                inputs: Mapping[str, Shape], where: str, *, fold_bn: bool,
                allow_opaque: bool) -> _Walk:
    """Walk state for the shape-inferred `graph`; `initializers` hold the weights' values."""
    w = _Walk(where=where, fold_bn=fold_bn, allow_opaque=allow_opaque,
              shapes=_static_shapes(graph), raw_uses=_reader_counts(graph),
              consts={t.name: t for t in initializers})
    w.consts.update((t.values.name, None) for t in graph.sparse_initializer)
    readers: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for t in _node_inputs(n):
            readers.setdefault(t, []).append(n)
    w.nan_readers = {n.output[0]: readers[n.output[0]][0] for n in graph.node
                     if n.op_type == "IsNaN" and n.domain in _DEFAULT_DOMAINS and n.output
                     and len(readers.get(n.output[0], ())) == 1
                     and w.raw_uses[n.output[0]] == 1}
    for name, shape in inputs.items():
        w.act[name] = name
        w.names.add(name)
        w.uses[name] = w.raw_uses[name]
        w.shapes[name] = shape
    return w


def _build(w: _Walk, name: str, inputs: Mapping[str, Shape],
           outputs: Sequence[str]) -> ComputeGraph:
    builder = GraphBuilder(name)
    for input_name, shape in inputs.items():
        builder.add_input(input_name, shape)
    extra = [f.name for f in fields(OpSpec)
             if f.name not in ("name", "kind", "op_type", "inputs", "output_shape", "attrs")]
    for s in w.specs.values():
        builder.add_op(s.name, s.kind, s.op_type, s.inputs, s.output_shape, attrs=dict(s.attrs),
                       **{k: getattr(s, k) for k in extra})
    return builder.build([w.act[o] for o in outputs if o in w.act])


def _record_constants(w: _Walk, node: onnx.NodeProto) -> list[np.ndarray] | None:
    """Record the outputs of a constant-like node as constants, with their values when they
    can be computed (`_fold`); returns those values."""
    values = _fold(w, node)
    for k, out in enumerate(node.output):
        if out:
            w.consts[out] = node.attribute[0] if node.op_type == "Constant" else (
                numpy_helper.from_array(values[k], out) if values is not None else None)
    return values


def _record_shape_sources(w: _Walk, node: onnx.NodeProto) -> None:
    """Note which activations' shapes a constant-like node's outputs are computed from."""
    sources: set[str] = set()
    for t in _node_inputs(node):
        if t in w.act and node.op_type in _SHAPE_OPS:
            sources.add(w.act[t])
        sources |= w.shape_sources.get(t, frozenset())
    if sources:
        w.shape_sources.update((out, frozenset(sources)) for out in node.output if out)


def _visit(w: _Walk, node: onnx.NodeProto) -> None:
    if _is_constant_like(w, node):
        _record_constants(w, node)
        _record_shape_sources(w, node)
        return
    handler = _HANDLERS.get(node.op_type) if node.domain in _DEFAULT_DOMAINS else None
    try:
        if node.domain in _DEFAULT_DOMAINS and node.op_type in ("IsNaN", "Where") \
                and _safe_softmax(w, node):
            return
        if handler is None:
            raise _Unsupported(_REFUSAL_REASONS.get(node.op_type, "")
                               if node.domain in _DEFAULT_DOMAINS else "")
        if handler is not _split and any(w.raw_uses[o] for o in node.output[1:] if o):
            raise _Unsupported("its secondary outputs are used")
        handler(w, node)
    except _Unsupported as err:
        if not w.allow_opaque:
            raise UnsupportedOpError(_unsupported_message(w, node, str(err))) from err
        _opaque(w, node)


_REFUSAL_REASONS = {
    "IsNaN": "of an activation, only the safe softmax Where(IsNaN(Softmax(x)), 0, Softmax(x)) "
             "is read",
}


def _safe_softmax(w: _Walk, node: onnx.NodeProto) -> bool:
    """The dynamo exporter's safe softmax ``Where(IsNaN(s), 0, s)`` with ``s = Softmax(x)``
    (an activation): the IsNaN yields nothing and the Where is `s` itself; True when `node` is
    one of the two (False: refused as usual, an IsNaN by name with the reason).

    This is exact wherever the softmax has no NaN: a row of x with a finite entry and no NaN
    or +inf (masked entries -inf) gives exp() of finite or -inf differences from the row's
    finite maximum, a sum of at least 1, so no NaN, and the Where picks s. A fully masked row
    (every entry -inf) differs: softmax computes -inf - (-inf) = NaN, so the pattern gives a
    row of zeros and the imported softmax (the executor's torch.softmax) a row of NaN. The
    attention masks the exporter writes (causal, or padding with a query that sees a token)
    leave no row fully masked. The IsNaN must be read by that Where alone, the Where's value
    for true a stored constant of zeros that does not broadcast s to a larger shape."""
    if node.op_type == "Where":
        s = w.safe_where.get(node.output[0])
        if s is None:
            return False
        _alias(w, node.output[0], s)
        return True
    s, flag = node.input[0], node.output[0]
    where = w.nan_readers.get(flag)
    spec = w.specs.get(w.act.get(s, ""))
    if (where is None or where.op_type != "Where" or where.domain not in _DEFAULT_DOMAINS
            or list(where.input) != [flag, where.input[1], s] or spec is None
            or spec.kind is not OpKind.SOFTMAX or dict(spec.attrs).get("log")):
        return False
    zero = _value(w, where.input[1])
    if zero is None or zero.size == 0 or np.any(zero != 0) \
            or np.broadcast_shapes(zero.shape, spec.output_shape) != spec.output_shape \
            or w.shapes.get(where.output[0]) != spec.output_shape:
        return False
    w.safe_where[where.output[0]] = s
    w.uses[w.act[s]] -= 1  # the IsNaN's read of s; the Where's goes with the alias
    return True


def _fold(w: _Walk, node: onnx.NodeProto) -> list[np.ndarray] | None:
    """The values of a constant-like node's outputs, when they can be computed: a Shape or Size
    of a tensor with a static shape, or any default-domain node (without subgraphs) whose
    inputs all have known values, run by onnx's reference evaluator. None otherwise (a value
    computed from values the model does not store, or over `_FOLD_LIMIT` elements)."""
    if node.domain not in _DEFAULT_DOMAINS or node.op_type == "Constant" \
            or any(True for _ in _subgraphs(node)):
        return None
    if node.op_type in _SHAPE_OPS:
        dims = w.shapes.get(node.input[0])
        if dims is None:
            return None
        if node.op_type == "Size":
            return [np.array(math.prod(dims), dtype=np.int64)]
        a = _attrs(node)
        start, end = int(a.get("start", 0)), a.get("end")
        return [np.array(dims[slice(start, None if end is None else int(end))], dtype=np.int64)]
    feeds = {t: _value(w, t) for t in node.input if t}
    if any(v is None for v in feeds.values()) \
            or sum(v.size for v in feeds.values()) > _FOLD_LIMIT:
        return None
    size = _fold_size(w, node, [feeds.get(t) if t else None for t in node.input])
    if size is not None and size > limits.MAX_FOLD_ELEMS:
        raise ModelFileError(f"ONNX model {w.where}: node {limits.shown(_label(node), 60)} "
                             f"({_op_type_text(node)}) computes a constant of {size:,} "
                             f"elements from constants; at most {limits.MAX_FOLD_ELEMS:,} "
                             "(the input limit, docs/limits.md)")
    if size is None or (size > _STUB_ELEMS and w.folded + size > limits.MAX_FOLD_ELEMS):
        return None  # its value stays unknown: an op that reads it is checked by its shape
    try:
        own = _OWN_FOLDS.get(node.op_type)
        if own is not None:
            values = own(_attrs(node), *(feeds.get(t) if t else None for t in node.input))
        else:
            from onnx.reference import ReferenceEvaluator

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                values = ReferenceEvaluator(node, opsets={"": w.opset}).run(None, feeds)
    except Exception:  # noqa: BLE001 - an op the reference cannot run stays unknown
        return None
    values = [np.asarray(v) for v in values]
    made = sum(v.size for v in values)
    if made > _STUB_ELEMS:
        w.folded += made
    return values


_FOLD_LIMIT = 1 << 26  # elements: constants computed from larger inputs are not evaluated


def _fold_gather_elements(a: Mapping[str, Any], data: np.ndarray,
                          indices: np.ndarray) -> list[np.ndarray]:
    """GatherElements in numpy: onnx's reference picks with ``np.choose``, which takes at most
    32 (64) choices, and its fallback reshapes wrongly, so a gather along an axis longer than
    that (BERT's token-type ids: a (1, 512) buffer gathered at 0..tokens-1) did not fold.
    Negative indices count from the end; one out of range leaves the value unknown."""
    axis = int(a.get("axis", 0))
    if data.ndim != indices.ndim or not -data.ndim <= axis < data.ndim:
        raise ValueError("GatherElements: rank or axis")
    axis %= data.ndim
    if any(i > d for k, (i, d) in enumerate(zip(indices.shape, data.shape, strict=True))
           if k != axis):
        raise ValueError("GatherElements: indices larger than the data")
    n = data.shape[axis]
    idx = indices.astype(np.int64)
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise ValueError("GatherElements: index out of range")
    # the output's other dimensions are the indices' (a leading part of the data's, no broadcast)
    data = data[tuple(slice(None) if k == axis else slice(0, i)
                      for k, i in enumerate(indices.shape))]
    return [np.take_along_axis(data, np.where(idx < 0, idx + n, idx), axis=axis)]


_OWN_FOLDS: dict[str, Callable[..., list[np.ndarray]]] = {
    "GatherElements": _fold_gather_elements,
}
_BROADCAST_OPS = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Where", "And",
    "Or", "Xor", "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "PRelu",
    "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor"})
_SIZE_KEEPING_OPS = frozenset({
    "Identity", "Cast", "CastLike", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
    "Slice", "Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Floor", "Ceil",
    "Round", "Sign", "Not", "Reciprocal", "Softmax", "LogSoftmax", "ReduceSum", "ReduceMean",
    "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ArgMax", "ArgMin",
    "TopK", "Split", "Clip", "DequantizeLinear", "QuantizeLinear", "Trilu", "CumSum",
    "ScatterND", "ScatterElements", "GatherElements", "Compress", "Unique", "Erf", "Sin",
    "Cos", "IsNaN", "IsInf", "HardSigmoid", "LeakyRelu", "Elu", "Selu", "Softplus",
    "Dropout", "EyeLike", "Size", "Shape"})


def _fold_size(w: _Walk, node: onnx.NodeProto,
               inputs: Sequence[np.ndarray | None]) -> int | None:
    """Elements a constant-like node's outputs will hold, known before it runs: from its
    inputs' values and shapes for the ops whose output can outgrow their inputs (the shape
    a model declares is not trusted for them), the sum of the inputs for ops that never
    outgrow them, else the static shapes inference gave; None when unknown (not folded)."""
    op, a = node.op_type, _attrs(node)
    given = [v for v in inputs if v is not None]
    try:
        if op in _SIZE_KEEPING_OPS:
            return sum(int(v.size) for v in given)
        if op in _BROADCAST_OPS:
            return math.prod(np.broadcast_shapes(*(v.shape for v in given)))
        if op == "ConstantOfShape":
            dims = [int(d) for d in inputs[0].reshape(-1)]
            return math.prod(dims) if all(d >= 0 for d in dims) else None
        if op == "Range":
            start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in inputs[:3])
            n = math.ceil((limit - start) / delta) if delta else None
            return None if n is None or not math.isfinite(n) else max(n, 0)
        if op == "Expand":
            dims = tuple(int(d) for d in inputs[1].reshape(-1))
            return math.prod(np.broadcast_shapes(inputs[0].shape, dims))
        if op == "Tile":
            reps = [int(r) for r in inputs[1].reshape(-1)]
            return math.prod(d * r for d, r in zip(inputs[0].shape, reps, strict=True)) \
                if all(r >= 0 for r in reps) else None
        if op == "Concat":
            return sum(int(v.size) for v in given)
        if op == "OneHot":
            return int(inputs[0].size) * int(np.asarray(inputs[1]).reshape(-1)[0])
        if op == "NonZero":
            return int(inputs[0].size) * max(inputs[0].ndim, 1)
        if op == "Gather":
            data, idx = inputs[0], inputs[1]
            axis = int(a.get("axis", 0)) % max(data.ndim, 1)
            return int(data.size // max(data.shape[axis], 1)) * int(idx.size) \
                if data.shape[axis] else 0
        if op in ("MatMul", "Gemm"):
            x, y = inputs[0], inputs[1]
            if x.ndim < 2 or y.ndim < 2:
                return max(int(x.size), int(y.size))
            rows = x.shape[-1] if op == "Gemm" and a.get("transA") else x.shape[-2]
            cols = y.shape[-2] if op == "Gemm" and a.get("transB") else y.shape[-1]
            return math.prod(np.broadcast_shapes(x.shape[:-2], y.shape[:-2])) * rows * cols
        if op in ("RandomNormal", "RandomUniform"):
            return math.prod(int(d) for d in a.get("shape", ()))
    except (ValueError, TypeError, IndexError, OverflowError, ZeroDivisionError):
        return None
    if op in ("RandomNormalLike", "RandomUniformLike"):
        return int(given[0].size) if given else None
    if op == "Pad" and len(inputs) > 1 and inputs[1] is not None and len(inputs) < 4:
        dims, pads = inputs[0].shape, [int(q) for q in inputs[1].reshape(-1)]
        if len(pads) != 2 * len(dims):
            return None
        return math.prod(max(d + pads[k] + pads[k + len(dims)], 0) for k, d in enumerate(dims))
    if op in ("Resize", "Upsample", "Pad", "Multinomial", "Bernoulli"):
        return None  # sizes from values this table does not follow: not folded
    shapes = [w.shapes.get(o) for o in node.output if o]
    if not shapes or any(s is None for s in shapes):
        return None
    return sum(math.prod(s) for s in shapes)


def _is_constant_like(w: _Walk, node: onnx.NodeProto) -> bool:
    """True for a node that computes from constants or shapes only: it yields no op."""
    if node.domain in _DEFAULT_DOMAINS and node.op_type in _SHAPE_OPS:
        return True
    return all(t in w.consts for t in _node_inputs(node))


def _op_type_text(node: onnx.NodeProto) -> str:
    return node.op_type if node.domain in _DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"


def _unsupported_message(w: _Walk, node: onnx.NodeProto, why: str) -> str:
    reason = f" ({why})" if why else ""
    return (f"unsupported ONNX op '{_op_type_text(node)}'{reason} at node '{_label(node)}' in "
            f"{w.where}; inspect, evaluate and simulate take --allow-opaque to treat it as an "
            "opaque op")


# --- walk helpers ------------------------------------------------------------------------------


def _shape(w: _Walk, tensor: str, node: onnx.NodeProto) -> Shape:
    try:
        return w.shapes[tensor]
    except KeyError:
        raise ModelFileError(f"ONNX model {w.where}: shape inference could not determine a "
                             f"static shape for tensor '{tensor}' at node '{_label(node)}' "
                             f"({_op_type_text(node)})") from None


def _value(w: _Walk, tensor: str) -> np.ndarray | None:
    """Value of a constant tensor when it is stored in the model (not computed)."""
    source = w.consts.get(tensor)
    if isinstance(source, onnx.TensorProto):
        return numpy_helper.to_array(source)
    if isinstance(source, onnx.AttributeProto):
        value = helper.get_attribute_value(source)
        if isinstance(value, onnx.TensorProto):
            return numpy_helper.to_array(value)
        return None if isinstance(value, onnx.SparseTensorProto) else np.asarray(value)
    return None


def _numel(w: _Walk, tensor: str) -> int:
    if not tensor:
        return 0
    if tensor in w.shapes:
        return math.prod(w.shapes[tensor])
    value = _value(w, tensor)
    return 0 if value is None else int(value.size)


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    def decode(v: Any) -> Any:
        return v.decode() if isinstance(v, bytes) else v
    return {a.name: decode(helper.get_attribute_value(a)) for a in node.attribute}


def _input(node: onnx.NodeProto, k: int) -> str:
    return node.input[k] if len(node.input) > k else ""


def _data_input(w: _Walk, node: onnx.NodeProto) -> str:
    """The first input, which must be an activation."""
    if not node.input or node.input[0] not in w.act:
        raise _Unsupported("its data input is a constant")
    return node.input[0]


def _require_constant(w: _Walk, node: onnx.NodeProto, start: int, what: str) -> None:
    if any(t and t not in w.consts for t in node.input[start:]):
        raise _Unsupported(f"{what} computed at run time")


def _claim(w: _Walk, base: str) -> str:
    name, k = base, 1
    while name in w.names:
        name, k = f"{base}#{k}", k + 1
    w.names.add(name)
    return name


def _emit(w: _Walk, node: onnx.NodeProto, kind: OpKind, op_type: str, inputs: Sequence[str], *,
          output: str | None = None, name: str | None = None,
          attrs: Mapping[str, Any] | None = None, refs: Sequence[str] = (),
          **spec_fields: Any) -> str:
    """Add an op reading the activation tensors `inputs` (then the ops or network inputs named
    in `refs`); returns its name."""
    out = output or node.output[0]
    shape = _shape(w, out, node)
    _check_tensor(w, shape, out, node)
    op_name = _claim(w, name or _label(node))
    w.specs[op_name] = OpSpec(name=op_name, kind=kind, op_type=op_type,
                              inputs=(*(w.act[t] for t in inputs), *refs), output_shape=shape,
                              attrs=freeze_attrs(attrs or {}), **spec_fields)
    w.act[out] = op_name
    w.uses[op_name] += w.raw_uses[out]
    return op_name


def _check_tensor(w: _Walk, shape: Shape, tensor: str, node: onnx.NodeProto) -> None:
    """An op's tensor after shape inference: no zero dimension (a zero-sized weight makes
    one), at most `limits.MAX_TENSOR_ELEMS` elements."""
    where = (f"ONNX model {w.where}: tensor {limits.shown(tensor, 60)} at node "
             f"{limits.shown(_label(node), 60)} ({_op_type_text(node)})")
    if not shape or min(shape) < 1:
        raise ModelFileError(f"{where} has shape {shape}, with a dimension below 1")
    if math.prod(shape) > limits.MAX_TENSOR_ELEMS:
        raise ModelFileError(f"{where} has {math.prod(shape):,} elements {shape}; at most "
                             f"{limits.MAX_TENSOR_ELEMS:,} (docs/limits.md)")


def _alias(w: _Walk, out: str, src: str) -> None:
    """Make tensor `out` another name for activation `src` (the node producing it vanishes)."""
    w.act[out] = w.act[src]
    w.uses[w.act[src]] += w.raw_uses[out] - 1


def _drop(w: _Walk, op_name: str) -> None:
    for ref in w.specs.pop(op_name).inputs:
        w.uses[ref] -= 1


def _pair(values: Sequence[int] | None, default: int) -> tuple[int, int]:
    if values is None:
        return default, default
    return int(values[0]), int(values[1])


def _window_padding(a: Mapping[str, Any], spatial: Sequence[int], kernel: tuple[int, int],
                    stride: tuple[int, int], dilation: tuple[int, int]) -> tuple[int, ...]:
    """(top, left, bottom, right), with ``auto_pad`` resolved into explicit amounts."""
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        total = [max(0, (-(-i // s) - 1) * s + (k - 1) * d + 1 - i)
                 for i, k, s, d in zip(spatial, kernel, stride, dilation, strict=True)]
        small, big = [t // 2 for t in total], [t - t // 2 for t in total]
        begin, end = (small, big) if auto == "SAME_UPPER" else (big, small)
        return begin[0], begin[1], end[0], end[1]
    if auto == "VALID":
        return 0, 0, 0, 0
    pads = [int(p) for p in a.get("pads", (0, 0, 0, 0))]
    return pads[0], pads[1], pads[2], pads[3]


def _auto_pad(a: Mapping[str, Any]) -> dict[str, Any]:
    """``auto_pad`` SAME as an attr: the padding it resolves to depends on the input size."""
    auto = a.get("auto_pad", "NOTSET")
    return {"auto_pad": auto} if auto in ("SAME_UPPER", "SAME_LOWER") else {}


# --- handlers ----------------------------------------------------------------------------------


def _conv(w: _Walk, node: onnx.NodeProto) -> None:
    x, weight, bias = _data_input(w, node), _input(node, 1), _input(node, 2)
    _require_constant(w, node, 1, "weights")
    in_shape, w_shape = _shape(w, x, node), _shape(w, weight, node)
    if len(in_shape) != 4 or len(w_shape) != 4:
        raise _Unsupported(f"{len(w_shape) - 2}-D convolution")
    a = _attrs(node)
    groups, kernel = int(a.get("group", 1)), (w_shape[2], w_shape[3])
    if in_shape[1] != w_shape[1] * groups:
        raise InputShapeError(f"ONNX model {w.where}: conv '{_label(node)}' has weights for "
                              f"{w_shape[1] * groups} input channels but its input "
                              f"{_dims_text(in_shape)} has {in_shape[1]}; check --input-shape")
    stride, dilation = _pair(a.get("strides"), 1), _pair(a.get("dilations"), 1)
    out = _shape(w, node.output[0], node)
    op_name = _emit(
        w, node, conv_kind(groups, in_shape[1]), "conv", [x], kernel=kernel, stride=stride,
        padding=_window_padding(a, in_shape[2:], kernel, stride, dilation), dilation=dilation,
        groups=groups, weight_elems=_numel(w, weight) + _numel(w, bias),
        macs=conv_macs(out, in_shape[1], groups, kernel), attrs=_auto_pad(a),
    )
    if not bias:
        w.biasless.add(op_name)
    if w.params is not None:
        _keep(w, op_name, weight=_value(w, weight), bias=_value(w, bias) if bias else None)


def _batchnorm(w: _Walk, node: onnx.NodeProto) -> None:
    x = _data_input(w, node)
    _require_constant(w, node, 1, "scale, bias, mean or variance")
    channels = _shape(w, x, node)[1]
    conv = w.specs.get(w.act[x])
    if (w.fold_bn and conv is not None and conv.kind in (OpKind.CONV, OpKind.DWCONV)
            and w.uses[conv.name] == 1):
        added_bias = channels if conv.name in w.biasless else 0
        w.specs[conv.name] = replace(conv, weight_elems=conv.weight_elems + added_bias)
        w.biasless.discard(conv.name)
        _alias(w, node.output[0], x)
        if w.params is not None:
            _fold_bn_params(w, conv.name, node, channels)
        return
    out = _shape(w, node.output[0], node)
    op_name = _emit(w, node, OpKind.BATCHNORM, "batchnorm", [x], weight_elems=2 * channels,
                    macs=math.prod(out))
    if w.params is not None and (affine := _bn_affine(w, node)) is not None:
        _keep(w, op_name, scale=affine[0], shift=affine[1])


def _bn_affine(w: _Walk, node: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray] | None:
    """(scale, shift) of an inference BatchNormalization, if its constants are stored."""
    values = [_value(w, _input(node, k)) for k in range(1, 5)]
    if any(v is None for v in values):
        return None
    gamma, beta, mean, var = (np.asarray(v, dtype=np.float64) for v in values)
    scale = gamma / np.sqrt(var + float(_attrs(node).get("epsilon", 1e-5)))
    return scale, beta - mean * scale


def _fold_bn_params(w: _Walk, conv: str, node: onnx.NodeProto, channels: int) -> None:
    """Fold a BatchNormalization's affine map into the parameters of `conv`."""
    affine, p = _bn_affine(w, node), (w.params or {}).get(conv, {})
    if affine is None or "weight" not in p:
        (w.params or {}).pop(conv, None)  # values unknown: no parameters rather than wrong ones
        return
    scale, shift = affine
    weight = p["weight"].astype(np.float64) * scale.reshape(-1, 1, 1, 1)
    bias = p["bias"].astype(np.float64) if "bias" in p else np.zeros(channels)
    w.params[conv] = {"weight": weight.astype(np.float32),
                      "bias": (bias * scale + shift).astype(np.float32)}


def _activation(w: _Walk, node: onnx.NodeProto) -> None:
    x = _data_input(w, node)
    _require_constant(w, node, 1, "parameters")
    weights = sum(_numel(w, t) for t in node.input[1:])
    op_name = _emit(w, node, OpKind.ELTWISE_UNARY, ACTIVATIONS[node.op_type.lower()], [x],
                    weight_elems=weights, attrs=_activation_attrs(node))
    gate = _gate_of(node)
    if gate:
        w.gates[op_name] = gate
    if node.op_type == "PRelu" and w.params is not None:
        slope = _value(w, node.input[1])
        _keep(w, op_name, weight=None if slope is None else np.ravel(slope))


def _activation_attrs(node: onnx.NodeProto) -> dict[str, Any]:
    """The activation parameters of a node that differ from torch's defaults (attr names as
    `from_torch` records them)."""
    a, out = _attrs(node), {}
    if node.op_type == "LeakyRelu" and not math.isclose(a.get("alpha", 0.01), 0.01,
                                                        rel_tol=1e-6):
        out["negative_slope"] = float(a["alpha"])
    elif node.op_type in ("Elu", "Celu") and not math.isclose(a.get("alpha", 1.0), 1.0,
                                                               rel_tol=1e-6):
        out["alpha"] = float(a["alpha"])
    elif node.op_type == "Gelu" and a.get("approximate", "none") != "none":
        out["approximate"] = str(a["approximate"])
    elif node.op_type == "HardSigmoid":
        alpha, beta = float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
        if not math.isclose(alpha, 1 / 6, rel_tol=1e-5) or not math.isclose(beta, 0.5):
            out.update(alpha=alpha, beta=beta)
    return out


def _gate_of(node: onnx.NodeProto) -> str | None:
    """The activation ``x * node(x)`` computes, if it is one (SiLU, Hardswish)."""
    if node.op_type == "Sigmoid":
        return "silu"
    a = _attrs(node)
    if (node.op_type == "HardSigmoid" and math.isclose(a.get("alpha", 0.2), 1 / 6, rel_tol=1e-5)
            and math.isclose(a.get("beta", 0.5), 0.5)):
        return "hardswish"
    return None


def _thresholded_relu(w: _Walk, node: onnx.NodeProto) -> None:
    """``x if x > alpha else 0``: torch's ``threshold(x, alpha, 0)``."""
    alpha = float(_attrs(node).get("alpha", 1.0))
    _emit(w, node, OpKind.ELTWISE_UNARY, "threshold", [_data_input(w, node)],
          attrs={"threshold": alpha, "value": 0.0})


def _shrink(w: _Walk, node: onnx.NodeProto) -> None:
    """Shrink with bias 0 is torch's hardshrink, with bias = lambd its softshrink."""
    x = _data_input(w, node)
    a = _attrs(node)
    lambd, bias = float(a.get("lambd", 0.5)), float(a.get("bias", 0.0))
    if bias != 0.0 and not math.isclose(bias, lambd, rel_tol=1e-6):
        raise _Unsupported(f"bias {bias:g} is neither 0 (hardshrink) nor lambd {lambd:g} "
                           "(softshrink)")
    attrs = {} if math.isclose(lambd, 0.5, rel_tol=1e-6) else {"lambd": lambd}
    _emit(w, node, OpKind.ELTWISE_UNARY, "hardshrink" if bias == 0.0 else "softshrink", [x],
          attrs=attrs)


def _clip(w: _Walk, node: onnx.NodeProto) -> None:
    x = _data_input(w, node)
    _require_constant(w, node, 1, "bounds")
    a = _attrs(node)
    low, high = (_value(w, _input(node, k)) for k in (1, 2))
    low = a.get("min") if low is None else low
    high = a.get("max") if high is None else high
    relu6 = low is not None and high is not None and np.all(low == 0) and np.all(high == 6)
    if relu6:
        _emit(w, node, OpKind.ELTWISE_UNARY, "relu6", [x])
        return
    if any(_input(node, k) and _value(w, node.input[k]) is None for k in (1, 2)):
        raise _Unsupported("bounds computed from other constants")
    attrs = {key: float(np.ravel(v)[0]) for key, v in (("min_val", low), ("max_val", high))
             if v is not None}
    _emit(w, node, OpKind.ELTWISE_UNARY, "clip", [x], attrs=attrs)


def _arith(w: _Walk, node: onnx.NodeProto) -> None:
    a, b = node.input[0], node.input[1]
    op_type = node.op_type.lower()
    if a in w.act and b in w.act:
        if not (op_type == "mul" and _fuse_gate(w, node, a, b)):
            _emit(w, node, OpKind.ELTWISE_BINARY, op_type, [a, b])
        return
    x, const = (a, b) if a in w.act else (b, a)
    if _absorb_affine(w, node, x, const):
        return
    n = _numel(w, const)
    grows = math.prod(_shape(w, node.output[0], node)) > math.prod(_shape(w, x, node))
    value = _value(w, const)
    attrs: dict[str, Any] = {"const_side": "right" if x == a else "left"}
    if n == 1 and value is not None:
        attrs["scalar"] = float(np.ravel(value)[0])
    elif n > 1 and const in w.shapes:
        attrs["const_shape"] = tuple(w.shapes[const])
    op_name = _emit(w, node, OpKind.ELTWISE_UNARY, op_type, [x], weight_elems=n if n > 1 else 0,
                    mapping=MappingType.ONE_TO_MANY if grows else None, attrs=attrs)
    if n > 1:
        _keep(w, op_name, const=value)


def _fuse_gate(w: _Walk, node: onnx.NodeProto, a: str, b: str) -> bool:
    """Replace ``Mul(x, gate(x))`` by one activation op; False if the operands do not fit."""
    for x, g in ((a, b), (b, a)):
        gate = w.specs.get(w.act[g])
        if (gate is not None and gate.name in w.gates and gate.inputs == (w.act[x],)
                and w.uses[gate.name] == 1):
            _drop(w, gate.name)
            _emit(w, node, OpKind.ELTWISE_UNARY, w.gates[gate.name], [x])
            return True
    return False


def _concat(w: _Walk, node: onnx.NodeProto) -> None:
    """A concatenation; constant operands (ViT's class token) count as weights, and their
    positions and values travel as ``const_at`` and ``const{k}``."""
    tensors = [t for t in node.input if t in w.act]
    consts = [(k, t) for k, t in enumerate(node.input) if t in w.consts]
    weights = sum(_numel(w, t) for _, t in consts)
    rank = len(_shape(w, node.output[0], node))
    attrs: dict[str, Any] = {"axis": int(_attrs(node).get("axis", 1)) % rank}
    values = [_value(w, t) for _, t in consts]
    if consts and all(v is not None for v in values):
        attrs.update(const_at=tuple(k for k, _ in consts),
                     const_shapes=tuple(tuple(int(d) for d in v.shape) for v in values))
    op_name = _emit(w, node, OpKind.CONCAT, "concat", tensors, weight_elems=weights,
                    attrs=attrs)
    if "const_at" in attrs:
        _keep(w, op_name, **{f"const{k}": v for k, v in enumerate(values)})


def _split(w: _Walk, node: onnx.NodeProto) -> None:
    x = _data_input(w, node)
    _require_constant(w, node, 1, "split sizes")
    rank = len(_shape(w, x, node))
    axis = int(_attrs(node).get("axis", 0)) % rank
    start = 0
    for k, out in enumerate(node.output):
        size = _shape(w, out, node)[axis] if out else 0
        if out and w.raw_uses[out]:
            if _shape(w, out, node) == _shape(w, x, node):
                _alias(w, out, x)
            else:
                _emit(w, node, OpKind.SLICE, "slice", [x], output=out,
                      name=f"{_label(node)}:{k}",
                      attrs={"axis": axis, "start": start, "end": start + size, "step": 1})
        start += size


def _slice(w: _Walk, node: onnx.NodeProto) -> None:
    if node.op_type == "Gather" and node.input[0] in w.consts and _input(node, 1) in w.act:
        _embedding(w, node)
        return
    x = _data_input(w, node)
    _require_constant(w, node, 1, "indices")
    if _shape(w, node.output[0], node) == _shape(w, x, node):
        _alias(w, node.output[0], x)
        return
    in_shape = _shape(w, x, node)
    find = _gather_attrs if node.op_type == "Gather" else _slice_attrs
    _emit(w, node, OpKind.SLICE, "slice", [x], attrs=find(w, node, in_shape) or {})


def _slice_attrs(w: _Walk, node: onnx.NodeProto, in_shape: Shape) -> dict[str, Any] | None:
    """axis/start/end/step of a Slice with stored constant bounds and positive steps."""
    a, rank = _attrs(node), len(in_shape)
    if _input(node, 1):
        parts = [_value(w, _input(node, k)) if _input(node, k) else None for k in range(1, 5)]
        if any(p is None for p, k in zip(parts, range(1, 5), strict=True) if _input(node, k)):
            return None
        starts, ends, axes, steps = parts
    else:  # opset < 10: attributes
        starts, ends, axes, steps = a.get("starts"), a.get("ends"), a.get("axes"), None
    starts, ends = np.ravel(starts).tolist(), np.ravel(ends).tolist()
    axes = list(range(len(starts))) if axes is None else np.ravel(axes).tolist()
    steps = [1] * len(starts) if steps is None else np.ravel(steps).tolist()
    found = []
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        axis = int(axis) % rank
        if step < 1:
            return None
        begin, stop, _ = slice(int(max(min(start, 2**62), -2**62)),
                               int(max(min(end, 2**62), -2**62))).indices(in_shape[axis])
        if (begin, stop, step) != (0, in_shape[axis], 1):
            found.append((axis, begin, max(begin, stop), int(step)))
    return _slice_dict(sorted(found))


def _gather_attrs(w: _Walk, node: onnx.NodeProto, in_shape: Shape) -> dict[str, Any] | None:
    """A Gather of one constant index, or of consecutive constant indices, as a slice."""
    index = _value(w, _input(node, 1))
    if index is None or index.size == 0:
        return None
    axis = int(_attrs(node).get("axis", 0)) % len(in_shape)
    values = [int(i) % in_shape[axis] for i in np.ravel(index)]
    if values != list(range(values[0], values[0] + len(values))):
        return None
    return _slice_dict([(axis, values[0], values[0] + len(values), 1)])


def _slice_dict(found: Sequence[tuple[int, int, int, int]]) -> dict[str, Any] | None:
    if not found:
        return None
    if len(found) == 1:
        axis, start, end, step = found[0]
        return {"axis": axis, "start": start, "end": end, "step": step}
    axes, starts, ends, steps = zip(*found, strict=True)
    return {"axis": axes, "start": starts, "end": ends, "step": steps}


def _pool(w: _Walk, node: onnx.NodeProto) -> None:
    x = _data_input(w, node)
    in_shape = _shape(w, x, node)
    if len(in_shape) != 4:
        raise _Unsupported(f"{len(in_shape) - 2}-D pooling")
    a = _attrs(node)
    kernel, stride = _pair(a.get("kernel_shape"), 1), _pair(a.get("strides"), 1)
    dilation = _pair(a.get("dilations"), 1)
    padding = _window_padding(a, in_shape[2:], kernel, stride, dilation)
    if is_identity_window(kernel, stride, padding):
        _alias(w, node.output[0], x)
        return
    attrs: dict[str, Any] = {"ceil_mode": bool(a.get("ceil_mode", 0)), **_auto_pad(a)}
    if node.op_type == "AveragePool" and not a.get("count_include_pad", 0) and any(padding):
        attrs["count_include_pad"] = False
    _emit(w, node, OpKind.POOL, "max" if node.op_type == "MaxPool" else "avg", [x],
          kernel=kernel, stride=stride, padding=padding, dilation=dilation, attrs=attrs)


def _global_pool_op(w: _Walk, node: onnx.NodeProto, x: str, op_type: str) -> None:
    in_shape = _shape(w, x, node)
    if len(in_shape) != 4:
        raise _Unsupported(f"global pooling of a rank-{len(in_shape)} tensor")
    window = (in_shape[2], in_shape[3])
    _emit(w, node, OpKind.GLOBAL_POOL, op_type, [x], kernel=window, stride=window)


def _global_pool(w: _Walk, node: onnx.NodeProto) -> None:
    op_type = "max" if node.op_type == "GlobalMaxPool" else "avg"
    _global_pool_op(w, node, _data_input(w, node), op_type)


def _reduce(w: _Walk, node: onnx.NodeProto) -> None:
    """ReduceMean / ReduceMax / ReduceSum: over (H, W) of a 4-D map a global pool; over any
    other axes the reduced axes moved last (a transpose) and flattened into H of a
    (1, M, R, 1) view (a reshape), a global pool, a reshape to the output (and ReduceSum's
    multiply by R), as `export_import` writes them."""
    x = _data_input(w, node)
    _require_constant(w, node, 1, "axes")
    a = _attrs(node)
    axes = a.get("axes")
    if axes is None and _input(node, 1):
        axes = _value(w, node.input[1])
        if axes is None:
            raise _Unsupported("axes computed at run time")
    in_shape = _shape(w, x, node)
    rank = len(in_shape)
    reduced = sorted({int(ax) % rank for ax in np.ravel(axes)}) if axes is not None and \
        np.size(axes) else ([] if a.get("noop_with_empty_axes") else list(range(rank)))
    if not reduced:
        _alias(w, node.output[0], x)
        return
    pool = "max" if node.op_type == "ReduceMax" else "avg"
    if rank == 4 and reduced == [2, 3] and node.op_type != "ReduceSum":
        _global_pool_op(w, node, x, pool)
        return
    kept = [d for d in range(rank) if d not in reduced]
    count = math.prod(in_shape[d] for d in reduced)
    m = math.prod(in_shape[d] for d in kept)
    base = _label(node)
    perm = tuple(kept + reduced)
    if perm != tuple(range(rank)):
        x = _internal(w, node, OpKind.TRANSPOSE, "permute", x, f"{base}.permute",
                      tuple(in_shape[p] for p in perm), attrs={"perm": perm})
    x = _internal(w, node, OpKind.RESHAPE, "reshape", x, f"{base}.view", (1, m, count, 1))
    x = _internal(w, node, OpKind.GLOBAL_POOL, pool, x, f"{base}.pool", (1, m, 1, 1),
                  kernel=(count, 1), stride=(count, 1))
    if node.op_type == "ReduceSum":
        x = _internal(w, node, OpKind.ELTWISE_UNARY, "mul", x, f"{base}.sum", (1, m, 1, 1),
                      attrs={"scalar": float(count), "const_side": "right"})
    if _shape(w, node.output[0], node) == (1, m, 1, 1):
        _alias(w, node.output[0], x)
    else:
        _emit(w, node, OpKind.RESHAPE, "reshape", [x], name=base)


def _internal(w: _Walk, node: onnx.NodeProto, kind: OpKind, op_type: str, x: str, name: str,
              shape: Shape, **fields: Any) -> str:
    """An op of a composition that `node` becomes, writing a tensor of its own (read once,
    by the next op of the composition); returns that tensor's name."""
    tensor = f"{node.output[0]}::{name}"
    w.shapes[tensor] = tuple(int(d) for d in shape)
    w.raw_uses[tensor] = 1
    _emit(w, node, kind, op_type, [x], output=tensor, name=name, **fields)
    return tensor


def _embedding(w: _Walk, node: onnx.NodeProto) -> None:
    """Gather of rows of a constant table at token ids (an activation): an embedding lookup,
    `OpKind.LINEAR` op_type ``embedding`` whose weights are the table."""
    table_name = node.input[0]
    table = _value(w, table_name)
    shape = w.shapes.get(table_name) or (None if table is None else tuple(table.shape))
    if shape is None or len(shape) != 2 or int(_attrs(node).get("axis", 0)) != 0:
        raise _Unsupported("a gather from a constant that is not a table of rows")
    op_name = _emit(w, node, OpKind.LINEAR, "embedding", [node.input[1]],
                    attrs={"num_embeddings": int(shape[0])},
                    weight_elems=int(shape[0] * shape[1]))
    _keep(w, op_name, weight=table)


def _gemm(w: _Walk, node: onnx.NodeProto) -> None:
    x = _data_input(w, node)
    _require_constant(w, node, 1, "weights")
    a_shape = _shape(w, x, node)
    in_features = a_shape[0] if _attrs(node).get("transA", 0) else a_shape[-1]
    out = _shape(w, node.output[0], node)
    op_name = _emit(w, node, OpKind.LINEAR, "linear", [x],
                    weight_elems=_numel(w, node.input[1]) + _numel(w, _input(node, 2)),
                    macs=linear_macs(out, in_features))
    if w.params is not None:
        a = _attrs(node)
        b, c = _value(w, node.input[1]), _value(w, _input(node, 2)) if _input(node, 2) else None
        if b is None or a.get("transA", 0) or (_input(node, 2) and c is None):
            return
        weight = (b if a.get("transB", 0) else b.T) * float(a.get("alpha", 1.0))
        bias = None if c is None else np.broadcast_to(
            np.ravel(c) * float(a.get("beta", 1.0)), (weight.shape[0],))
        _keep(w, op_name, weight=weight, bias=bias)


def _matmul(w: _Walk, node: onnx.NodeProto) -> None:
    x = _data_input(w, node)
    out = _shape(w, node.output[0], node)
    if node.input[1] in w.act:  # a product of two activations (attention's scores)
        _emit(w, node, OpKind.MATMUL, "matmul", [x, node.input[1]],
              macs=matmul_macs(out, _shape(w, x, node)))
        return
    op_name = _emit(w, node, OpKind.LINEAR, "linear", [x],
                    weight_elems=_numel(w, node.input[1]),
                    macs=linear_macs(out, _shape(w, x, node)[-1]))
    matrix = _value(w, node.input[1])
    if matrix is not None and matrix.ndim == 2:
        _keep(w, op_name, weight=matrix.T)


def _reshape(w: _Walk, node: onnx.NodeProto) -> None:
    x = _data_input(w, node)
    _require_constant(w, node, 1, "target shape")
    before, after = math.prod(_shape(w, x, node)), math.prod(_shape(w, node.output[0], node))
    if before != after:
        raise ModelFileError(f"ONNX model {w.where}: {node.op_type} at node "
                             f"{limits.shown(_label(node), 60)} turns {before:,} elements into "
                             f"{after:,}")
    if _shape(w, node.output[0], node) == _shape(w, x, node):
        _alias(w, node.output[0], x)
        return
    if not _fuse_channel_shuffle(w, node, x) and not _fuse_group_norm(w, node, x):
        _emit(w, node, OpKind.RESHAPE, node.op_type.lower(), [x])


def _fuse_channel_shuffle(w: _Walk, node: onnx.NodeProto, x: str) -> bool:
    """Replace ``Reshape(N, g, C/g, ...) -> Transpose(0, 2, 1, ...) -> Reshape(N, C, ...)`` (a
    channel shuffle as exporters write it) by one ``channel_shuffle`` op, as `from_torch`
    imports it; False if the ops before `node` do not form one."""
    swap = w.specs.get(w.act[x])
    if swap is None or swap.kind is not OpKind.TRANSPOSE or w.uses[swap.name] != 1:
        return False
    split = w.specs.get(swap.inputs[0])
    if split is None or split.kind is not OpKind.RESHAPE or w.uses[split.name] != 1:
        return False
    src = split.inputs[0]
    source = w.specs[src].output_shape if src in w.specs else w.shapes.get(src)
    mid, out, rank = split.output_shape, _shape(w, node.output[0], node), len(split.output_shape)
    if (source != out or rank < 3 or len(out) != rank - 1
            or dict(swap.attrs).get("perm") != (0, 2, 1, *range(3, rank))
            or mid[0] != out[0] or mid[1] * mid[2] != out[1] or mid[3:] != out[2:]):
        return False
    _drop(w, swap.name)
    _drop(w, split.name)
    w.uses[src] += 1
    _emit(w, node, OpKind.TRANSPOSE, "channel_shuffle", [], refs=[src],
          attrs={"groups": int(mid[1])})
    return True


def _expand(w: _Walk, node: onnx.NodeProto) -> None:
    """Expand of an activation to a constant shape: a broadcast copy (``expand``, as
    `from_torch` imports ``Tensor.expand``; grouped-query attention repeats its key/value heads
    so), after an ``unsqueeze`` when the target has more dimensions; the same shape is an
    alias."""
    x = _data_input(w, node)
    _require_constant(w, node, 1, "target shape")
    shape, out = _shape(w, x, node), _shape(w, node.output[0], node)
    if len(shape) > len(out) or any(d not in (1, o) for d, o in
                                    zip(shape[::-1], out[::-1], strict=False)):
        raise ModelFileError(f"ONNX model {w.where}: Expand at node "
                             f"{limits.shown(_label(node), 60)} cannot broadcast "
                             f"{_dims_text(shape)} to {_dims_text(out)}")
    if shape == out:
        _alias(w, node.output[0], x)
        return
    if len(shape) < len(out):
        x = _internal(w, node, OpKind.RESHAPE, "unsqueeze", x, f"{_label(node)}.view",
                      (1,) * (len(out) - len(shape)) + tuple(shape))
    _emit(w, node, OpKind.RESHAPE, "expand", [x])


def _transpose(w: _Walk, node: onnx.NodeProto) -> None:
    x = _data_input(w, node)
    perm = _attrs(node).get("perm")
    if perm is not None and list(perm) == sorted(perm):
        _alias(w, node.output[0], x)
        return
    rank = len(_shape(w, x, node))
    perm = tuple(range(rank))[::-1] if perm is None else tuple(int(p) % rank for p in perm)
    _emit(w, node, OpKind.TRANSPOSE, "transpose", [x], attrs={"perm": perm})


def _depth_to_space(w: _Walk, node: onnx.NodeProto) -> None:
    x = _data_input(w, node)
    a = _attrs(node)
    if a.get("mode", "DCR") != "CRD":
        raise _Unsupported("DCR ordering (only CRD, torch's pixel shuffle, is supported)")
    _emit(w, node, OpKind.TRANSPOSE, "pixel_shuffle", [x],
          attrs={"upscale_factor": int(a["blocksize"])})


def _resize(w: _Walk, node: onnx.NodeProto) -> None:
    x = _data_input(w, node)
    _require_constant(w, node, 1, "scales or sizes")
    a = _attrs(node)
    mode = a.get("mode", "nearest")
    if len(_shape(w, x, node)) == 4:  # torch's names for the 2-D modes, as from_torch reports
        mode = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
    attrs: dict[str, Any] = {"mode": mode}
    if a.get("coordinate_transformation_mode") == "align_corners":
        attrs["align_corners"] = True
    _emit(w, node, OpKind.RESIZE, "resize", [x], attrs={**attrs, **_resize_size(w, node, x)})


def _resize_size(w: _Walk, node: onnx.NodeProto, x: str) -> dict[str, Any]:
    """What a resize's output size follows, for symbolic shapes: ``size_of`` (another
    tensor's spatial size, read through Shape), a constant ``size``, or a ``scale``."""
    out = _shape(w, node.output[0], node)
    sizes = _input(node, 3) if node.op_type == "Resize" else ""
    if sizes:
        read = w.shape_sources.get(sizes, frozenset())
        like = [t for t in sorted(read - {w.act[x]})
                if (w.specs[t].output_shape if t in w.specs else w.shapes.get(t, ()))[-2:]
                == out[-2:]]
        if len(like) == 1:
            return {"size_of": like[0]}
        value = None if read else _value(w, sizes)
        return {} if value is None else {"size": tuple(int(v) for v in np.ravel(value)[-2:])}
    scales = _input(node, 2 if node.op_type == "Resize" else 1)
    value = _value(w, scales) if scales else None
    if value is None or value.size < 2:
        return {}
    return {"scale": tuple(float(v) for v in np.ravel(value)[-2:])}


def _pad(w: _Walk, node: onnx.NodeProto) -> None:
    x = _data_input(w, node)
    _require_constant(w, node, 1, "pads")
    pads = _value(w, _input(node, 1)) if _input(node, 1) else _attrs(node).get("pads")
    axes = _value(w, _input(node, 3)) if _input(node, 3) else None
    if pads is None or (_input(node, 3) and axes is None):
        raise _Unsupported("pads computed from other constants")
    padding = _spatial_pads([int(p) for p in np.ravel(pads)], axes, len(_shape(w, x, node)))
    a = _attrs(node)
    mode = {"edge": "replicate", "wrap": "circular"}.get(a.get("mode", "constant"),
                                                         a.get("mode", "constant"))
    attrs: dict[str, Any] = {}
    if mode != "constant":
        attrs["mode"] = mode
    else:
        value = _value(w, _input(node, 2)) if _input(node, 2) else a.get("value", 0.0)
        if _input(node, 2) and value is None:
            raise _Unsupported("pad value computed from other constants")
        if float(np.ravel(value)[0]) != 0.0:
            attrs["value"] = float(np.ravel(value)[0])
    _emit(w, node, OpKind.PAD, "pad", [x], padding=padding, attrs=attrs)


def _spatial_pads(pads: Sequence[int], axes: np.ndarray | None,
                  rank: int) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) of an ONNX ``[begin..., end...]`` list over `axes`."""
    chosen = [int(ax) % rank for ax in np.ravel(axes)] if axes is not None else range(rank)
    begin, end = [0] * rank, [0] * rank
    for j, ax in enumerate(chosen):
        begin[ax], end[ax] = pads[j], pads[len(chosen) + j]
    return begin[-2], begin[-1], end[-2], end[-1]


def _softmax(w: _Walk, node: onnx.NodeProto) -> None:
    x = _data_input(w, node)
    rank = len(_shape(w, x, node))
    legacy = w.opset < 13  # before opset 13: softmax over the axes from `axis` on, together
    axis = int(_attrs(node).get("axis", 1 if legacy else -1)) % rank
    attrs: dict[str, Any] = {"axis": tuple(range(axis, rank)) if legacy and axis < rank - 1
                             else axis}
    if node.op_type == "LogSoftmax":
        attrs["log"] = True
    _emit(w, node, OpKind.SOFTMAX, "softmax", [x], attrs=attrs)


def _norm_op(w: _Walk, node: onnx.NodeProto, x: str, op_type: str, axes: tuple[int, ...],
             scale: str, bias: str, param_shape: Shape, groups: int | None = None) -> str:
    """Emit a NORM op with constant `scale` and `bias` (names, "" when absent) of
    `param_shape` elements each. A scale of ones and a bias of zeros that the model computes
    (Constant nodes, not initializers: how exporters write a norm without affine parameters)
    are no parameters."""
    _require_constant(w, node, 1, "scale or bias")
    if _is_artifact(w, scale, 1.0) and (not bias or _is_artifact(w, bias, 0.0)):
        scale = bias = ""
    elif _is_artifact(w, bias, 0.0):
        bias = ""
    for t in (scale, bias):
        if t and math.prod(_shape(w, t, node)) != math.prod(param_shape):
            raise _Unsupported(f"a scale or bias of shape {_dims_text(_shape(w, t, node))} "
                               f"for {_dims_text(param_shape)} values")
    attrs: dict[str, Any] = {"eps": float(_attrs(node).get("epsilon", 1e-5)), "axes": axes,
                             "affine": bool(scale)}
    if groups is not None:
        attrs["groups"] = groups
    op_name = _emit(w, node, OpKind.NORM, op_type, [x], attrs=attrs,
                    weight_elems=_numel(w, scale) + _numel(w, bias))
    if w.params is not None:
        values = [_value(w, t) if t else None for t in (scale, bias)]
        _keep(w, op_name, **{k: None if v is None else np.reshape(v, param_shape)
                             for k, v in zip(("weight", "bias"), values, strict=True)})
    return op_name


def _is_artifact(w: _Walk, tensor: str, identity: float) -> bool:
    """True for a Constant node's tensor whose every value is `identity`."""
    if not tensor or not isinstance(w.consts.get(tensor), onnx.AttributeProto):
        return False
    value = _value(w, tensor)
    return value is not None and bool(np.all(value == identity))


def _layer_norm(w: _Walk, node: onnx.NodeProto) -> None:
    """LayerNormalization (opset 17) and RMSNormalization (opset 23) over the axes from
    ``axis`` on."""
    x = _data_input(w, node)
    shape = _shape(w, x, node)
    axis = int(_attrs(node).get("axis", -1)) % len(shape)
    op_type = "layernorm" if node.op_type == "LayerNormalization" else "rmsnorm"
    if op_type == "rmsnorm" and _input(node, 2):
        raise _Unsupported("a bias")
    _norm_op(w, node, x, op_type, tuple(range(axis, len(shape))), _input(node, 1),
             _input(node, 2), shape[axis:])


def _group_norm(w: _Walk, node: onnx.NodeProto) -> None:
    """GroupNormalization (per-channel scale: opset 21, or opset 18 with one group per
    channel) and InstanceNormalization (one group per channel)."""
    x = _data_input(w, node)
    shape = _shape(w, x, node)
    if len(shape) < 3:
        raise _Unsupported(f"a rank-{len(shape)} input")
    channels = shape[1]
    groups = channels if node.op_type == "InstanceNormalization" \
        else int(_attrs(node)["num_groups"])
    if channels % groups:
        raise _Unsupported(f"{channels} channels in {groups} groups")
    scale, bias = _input(node, 1), _input(node, 2)
    if node.op_type == "GroupNormalization" and scale \
            and math.prod(_shape(w, scale, node)) == groups != channels:
        raise _Unsupported("a scale per group (opset 18): re-export with opset 21")
    op_name = _norm_op(w, node, x, "groupnorm", tuple(range(1, len(shape))), scale, bias,
                       (channels,), groups)
    if node.op_type == "InstanceNormalization" and not w.specs[op_name].weight_elems:
        w.plain_norms.add(op_name)  # maybe the middle of the GroupNorm pattern


def _fuse_group_norm(w: _Walk, node: onnx.NodeProto, x: str) -> bool:
    """Replace ``Reshape(N, G, -1) -> InstanceNormalization(ones, zeros) -> Reshape(back)``
    (torch's GroupNorm as its exporter writes it) by one ``groupnorm`` op without weights, as
    `from_torch` imports it (the Mul and Add of its scale and bias follow, `_absorb_affine`);
    False if the ops before `node` do not form one."""
    norm = w.specs.get(w.act[x])
    if norm is None or norm.name not in w.plain_norms or w.uses[norm.name] != 1:
        return False
    split = w.specs.get(norm.inputs[0])
    if split is None or split.kind is not OpKind.RESHAPE or w.uses[split.name] != 1:
        return False
    src = split.inputs[0]
    source = w.specs[src].output_shape if src in w.specs else w.shapes.get(src)
    out, mid = _shape(w, node.output[0], node), split.output_shape
    if source != out or len(out) < 3 or len(mid) != 3 or mid[0] != out[0] \
            or out[1] % mid[1] or math.prod(mid) != math.prod(out):
        return False
    _drop(w, norm.name)
    _drop(w, split.name)
    w.uses[src] += 1
    op_name = _emit(w, node, OpKind.NORM, "groupnorm", [], refs=[src],
                    attrs={**dict(norm.attrs), "groups": int(mid[1]), "affine": False,
                           "axes": tuple(range(1, len(out)))})
    w.pattern_norms[op_name] = set()
    return True


def _absorb_affine(w: _Walk, node: onnx.NodeProto, x: str, const: str) -> bool:
    """Fold the Mul by a per-channel scale, then the Add of a per-channel bias, that follow a
    GroupNorm pattern's op (`_fuse_group_norm`) into it; False if they do not fit."""
    norm = w.specs.get(w.act[x])
    if norm is None or norm.name not in w.pattern_norms or w.uses[norm.name] != 1:
        return False
    channels, rank = norm.output_shape[1], len(norm.output_shape)
    value, shape = _value(w, const), w.shapes.get(const, ())
    attrs, op, done = dict(norm.attrs), node.op_type, w.pattern_norms[norm.name]
    artifact = _is_artifact(w, const, 1.0 if op == "Mul" else 0.0)  # the identity: no weights
    kept_dims = tuple(d for d in shape if d != 1)
    if value is None or op not in ("Mul", "Add") or "Add" in done or op in done \
            or kept_dims not in ({(channels,), ()} if artifact else {(channels,)}) \
            or len(shape) > rank or (len(shape) == rank and shape[0] != 1) \
            or (kept_dims and len(shape) < rank - 1):
        return False
    if op == "Add" and not artifact and not attrs["affine"]:
        return False  # a shift without a scale: no IR parameter format
    _drop(w, norm.name)
    w.names.discard(norm.name)  # the op keeps its name
    w.uses[norm.name] = 0
    w.uses[norm.inputs[0]] += 1
    if not artifact:
        attrs["affine"] = True
    op_name = _emit(w, node, OpKind.NORM, "groupnorm", [], refs=list(norm.inputs),
                    name=norm.name, attrs=attrs,
                    weight_elems=norm.weight_elems + (0 if artifact else channels))
    w.pattern_norms[op_name] = {*done, op}
    kept = (w.params or {}).pop(norm.name, {})
    if not artifact:
        kept["weight" if op == "Mul" else "bias"] = np.ravel(value).astype(np.float32)
    if w.params is not None and kept:
        w.params[op_name] = kept
    return True


def _forward(w: _Walk, node: onnx.NodeProto) -> None:
    _alias(w, node.output[0], _data_input(w, node))


def _opaque(w: _Walk, node: onnx.NodeProto) -> None:
    """Import a node as an OPAQUE op (plus one per further output that is read)."""
    tensors = [t for t in _node_inputs(node) if t in w.act]
    weights = sum(_numel(w, t) for t in node.input if t in w.consts)
    op_type = _op_type_text(node).lower()
    w.opaque.append(f"{_op_type_text(node)} at node '{_label(node)}'")
    outputs = [(k, out) for k, out in enumerate(node.output) if out]
    if not outputs:
        return
    first, *others = outputs
    op_name = _emit(w, node, OpKind.OPAQUE, op_type, tensors, output=first[1],
                    weight_elems=weights)
    for k, out in others:
        if w.raw_uses[out]:
            _emit(w, node, OpKind.OPAQUE, op_type, [first[1]], output=out,
                  name=f"{op_name}:{k}")


_ACTIVATION_OPS = ("Relu", "HardSwish", "HardSigmoid", "Sigmoid", "Tanh", "LeakyRelu", "Elu",
                   "Selu", "Celu", "Gelu", "Erf", "Exp", "Log", "Sqrt", "Neg", "Abs",
                   "Reciprocal", "Softplus", "Softsign", "PRelu", "Mish", "Swish")
_HANDLERS: dict[str, Callable[[_Walk, onnx.NodeProto], None]] = {
    "Conv": _conv, "BatchNormalization": _batchnorm, "Clip": _clip,
    "ThresholdedRelu": _thresholded_relu, "Shrink": _shrink,
    **dict.fromkeys(_ACTIVATION_OPS, _activation),
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Pow"), _arith),
    "Concat": _concat, "Split": _split, "Slice": _slice, "Gather": _slice,
    "MaxPool": _pool, "AveragePool": _pool,
    "GlobalAveragePool": _global_pool, "GlobalMaxPool": _global_pool,
    "ReduceMean": _reduce, "ReduceMax": _reduce, "ReduceSum": _reduce,
    "Gemm": _gemm, "MatMul": _matmul,
    **dict.fromkeys(("Flatten", "Reshape", "Squeeze", "Unsqueeze"), _reshape),
    "Transpose": _transpose, "DepthToSpace": _depth_to_space, "Expand": _expand,
    "Resize": _resize, "Upsample": _resize, "Pad": _pad,
    "Softmax": _softmax, "LogSoftmax": _softmax,
    "LayerNormalization": _layer_norm, "RMSNormalization": _layer_norm,
    "GroupNormalization": _group_norm, "InstanceNormalization": _group_norm,
    **dict.fromkeys(("Identity", "Dropout", "Cast"), _forward),
}

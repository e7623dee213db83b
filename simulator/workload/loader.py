"""One entry point for every way a user names a network.

`load` accepts a zoo name (optionally with a resolution, ``resnet50@320``), a path to an ``.onnx``
model, a path to a graph ``.json`` written by `ComputeGraph.to_json`, or ``module:callable``
naming a factory of an ``nn.Module`` importable from the current directory or Python path.

A spec is resolved and checked before torch is imported: zoo names, resolutions and input
shapes are checked against the zoo catalog (`simulator.workload.zoo_catalog`, no torch), and
torch is imported only to build a zoo network or a ``module:callable`` one.
"""

from __future__ import annotations

import difflib
import importlib
import os
import re
import sys
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from simulator import limits
from simulator.workload.errors import (
    InputShapeError,
    ModelFileError,
    UnknownModelError,
    UnsupportedOpError,
)
from simulator.workload.graph import ComputeGraph
from simulator.workload.input_shape import check_input_shape
from simulator.workload.zoo_catalog import catalog, resolution_shape

__all__ = ["check_spec", "import_torchvision", "import_zoo_entry", "load", "load_zoo",
           "resolve_zoo_name", "zoo_module"]

DEFAULT_INPUT_SHAPE = (1, 3, 224, 224)
_RESOLUTION = re.compile(r"^(?P<name>[^@]+)@(?P<h>\d+)(?:x(?P<w>\d+))?$")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.\s]", "", name.lower())


def resolve_zoo_name(name: str) -> str | None:
    """The zoo key `name` denotes (case, '-' and '_' ignored), or None."""
    wanted = _canonical(name)
    return next((k for k in catalog() if _canonical(k) == wanted), None)


def _split_resolution(spec: str) -> tuple[str, tuple[int, ...] | None]:
    """``name@H`` or ``name@HxW`` -> (name, (H,) or (H, W)); (spec, None) without ``@``."""
    m = _RESOLUTION.match(spec)
    if not m:
        return spec, None
    values = (int(m["h"]),) if m["w"] is None else (int(m["h"]), int(m["w"]))
    if min(values) <= 0:
        raise InputShapeError(f"resolution in {spec!r} must be positive")
    return m["name"], values


def zoo_module(name: str):  # noqa: ANN201 - returns torch.nn.Module; torch typed lazily
    """A freshly built (random-initialised) `nn.Module` of zoo network `name`."""
    key = resolve_zoo_name(name)
    if key is None:
        raise _unknown(name)
    from simulator.workload.zoo import ZOO  # torch: only to build it

    return ZOO[key].factory()


def load_zoo(name: str, input_shape: Sequence[int] | None = None) -> ComputeGraph:
    """The graph of a zoo network, optionally at another input shape (cached per shape)."""
    key = resolve_zoo_name(name)
    if key is None:
        raise _unknown(name)
    shape = tuple(input_shape) if input_shape is not None else catalog()[key].input_shape
    return _zoo_graph(key, check_input_shape(shape))


@lru_cache(maxsize=32)
def _zoo_graph(key: str, shape: tuple[int, ...]) -> ComputeGraph:
    from simulator.workload.zoo import ZOO

    return import_zoo_entry(ZOO[key], shape)


def import_zoo_entry(entry: Any, shape: tuple[int, ...]) -> ComputeGraph:
    """The graph of zoo entry `entry` (a `zoo.ZooEntry`) at input shape `shape`: its module
    imported through torch.fx, or through ``torch.export`` on its example inputs where the
    entry has them (a decoder's token ids and KV cache)."""
    try:
        module = entry.build(shape)
        example = entry.examples(shape) if entry.examples is not None else None
    except ValueError as err:  # a model built for its input shape: ViT's patches
        raise InputShapeError(f"input shape {','.join(map(str, shape))} does not fit model "
                              f"{entry.name!r}: {err}") from None
    if example is not None:
        from simulator.workload.export_import import from_export

        return from_export(module, example=example, name=entry.name)
    from simulator.workload.torch_import import from_torch

    return from_torch(module, shape, name=entry.name)


def load(spec: str, input_shape: Sequence[int] | str | None = None, *,
         allow_opaque: bool = False) -> ComputeGraph:
    """Load a network given by zoo name, ONNX path, graph JSON path or ``module:callable``.

    Args:
        spec: What to load; a zoo name may carry a resolution (``resnet50@320``,
            ``resnet50@320x240``) or, for BERT, a sequence length (``bert_base@512``).
        input_shape: Overrides the input shape (N,C,H,W); a resolution in `spec` overrides H,W
            (L) of it or of the zoo's default shape.
        allow_opaque: Import unsupported ops as opaque ops instead of failing.

    Raises:
        UnknownModelError, ModelFileError, InputShapeError, UnsupportedOpError, GraphError.
    """
    kind, target, shape = _resolve(spec, input_shape)
    if kind == "zoo":
        return load_zoo(target, shape)
    if kind == "onnx":
        return _load_onnx(Path(target), shape, allow_opaque)
    if kind == "json":
        return _load_json(Path(target))
    return _load_callable(target, shape, allow_opaque)


def check_spec(spec: str, input_shape: Sequence[int] | str | None = None, *,
               allow_opaque: bool = False) -> None:
    """Raise what `load` would raise for `spec`, as far as that is known without importing
    torch or building anything: a name too long, a bad input shape or resolution, a name that
    is neither a zoo network, a file nor ``module:callable``, a model file that does not exist.

    Callers check a model with it before their other inputs' checks and load it after them,
    so that every check answers before a network is built (`load` checks the same again).

    Raises:
        UnknownModelError, ModelFileError, InputShapeError.
    """
    kind, target, shape = _resolve(spec, input_shape)
    if kind in ("onnx", "json") and not Path(target).is_file():
        load(spec, shape, allow_opaque=allow_opaque)  # raises its file loader's own error


def _resolve(spec: str, input_shape: Sequence[int] | str | None,
             ) -> tuple[str, str, tuple[int, ...] | None]:
    """(``zoo`` | ``onnx`` | ``json`` | ``callable``, the zoo key, path or reference, the
    checked input shape) of a spec, without importing torch or reading a file."""
    if any(len(part) > limits.MAX_NAME_CHARS for part in spec.split(os.sep)):
        raise UnknownModelError(f"model {spec[:40]!r}... is a name longer than "
                                f"{limits.MAX_NAME_CHARS} characters")
    shape = check_input_shape(input_shape) if input_shape is not None else None
    base, resolution = _split_resolution(spec)
    key = resolve_zoo_name(base)
    if key is not None:
        if resolution is not None:
            facts = catalog()[key]
            try:
                shape = resolution_shape(key, facts.input_shape, facts.resolution_axes,
                                         resolution, shape)
            except ValueError as err:
                raise InputShapeError(f"model {spec!r}: {err}") from None
        return "zoo", key, shape
    if resolution is not None:
        raise _unknown(base)
    path = Path(spec)
    if path.suffix.lower() == ".onnx" or (path.exists() and path.suffix.lower() != ".json"):
        return "onnx", spec, shape
    if path.suffix.lower() == ".json":
        return "json", spec, shape
    if ":" in spec and not path.exists():
        return "callable", spec, shape
    raise _unknown(spec)


def _load_onnx(path: Path, shape: tuple[int, ...] | None, allow_opaque: bool) -> ComputeGraph:
    from simulator.workload.onnx_import import from_onnx

    return from_onnx(path, shape, allow_opaque=allow_opaque)


def _load_json(path: Path) -> ComputeGraph:
    doc = limits.load_json_file(path, "graph", f"graph file {str(path)!r}", ModelFileError)
    if not isinstance(doc, dict):
        raise ModelFileError(f"graph file {str(path)!r} is not a JSON object")
    return ComputeGraph.from_dict(doc)


_TORCHVISION_OPS: list[Any] = []  # the torch.library.Library defining the shim's schemas
TORCHVISION_WARNING = ("torchvision's compiled ops do not match this torch build; detection "
                       "ops (nms, roi_align, ...) are unavailable, the models import")


def _is_torchvision_mismatch(err: BaseException) -> bool:
    """True for the error a torchvision whose ``_C`` extension cannot load raises on import."""
    return isinstance(err, RuntimeError) and "operator torchvision::" in str(err) \
        and "does not exist" in str(err)


def _define_torchvision_ops() -> None:
    """Define the schemas torchvision's Python side registers fakes for (once, with a warning)."""
    if _TORCHVISION_OPS:
        return
    import torch

    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _TORCHVISION_OPS.append(lib)
    warnings.warn(TORCHVISION_WARNING, stacklevel=3)


def _forget(prefixes: Sequence[str]) -> None:
    """Drop partially imported modules so that the next import runs them again."""
    for name in [m for m in sys.modules
                 if any(m == p or m.startswith(p + ".") for p in prefixes)]:
        del sys.modules[name]


def _import_module(name: str) -> ModuleType:
    """`importlib.import_module`, retried once after the torchvision shim if it needs it.

    A torchvision wheel built against another torch (e.g. a CUDA wheel on a CPU-only torch)
    fails on import with ``RuntimeError: operator torchvision::nms does not exist`` because its
    compiled extension cannot load. Its models are pure Python: defining the two schemas its
    Python code refers to makes them importable; detection ops stay unavailable.
    """
    try:
        return importlib.import_module(name)
    except RuntimeError as err:
        if not _is_torchvision_mismatch(err) or _TORCHVISION_OPS:
            raise
    _define_torchvision_ops()
    _forget(["torchvision", name])
    return importlib.import_module(name)


def import_torchvision() -> ModuleType:
    """Import torchvision, applying the compiled-ops shim of `_import_module` when needed.

    Raises:
        ImportError: torchvision is not installed.
    """
    return _import_module("torchvision")


def _load_callable(spec: str, shape: tuple[int, ...] | None,
                   allow_opaque: bool) -> ComputeGraph:
    module_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        factory = getattr(_import_module(module_name), attr)
    except SystemExit as err:
        raise UnknownModelError(f"importing module {module_name!r} for model {spec!r} called "
                                f"exit({str(err.code)[:40]!r})") from None
    except ImportError as err:
        raise UnknownModelError(f"cannot import module {module_name!r} for model {spec!r}: "
                                f"{err}") from err
    except AttributeError:
        raise UnknownModelError(f"module {module_name!r} has no attribute {attr!r} "
                                f"(model {spec!r})") from None
    module = _build(factory, spec)
    if isinstance(module, ComputeGraph):  # built in the IR (simulator.workload.synthetic)
        if shape is not None and tuple(shape) != tuple(module.input_shapes[0]):
            raise InputShapeError(f"model {spec!r} builds its graph in the IR at input shape "
                                  f"{','.join(map(str, module.input_shapes[0]))}; an input "
                                  "shape cannot change it")
        return module
    return import_module_graph(module, shape or DEFAULT_INPUT_SHAPE, attr, allow_opaque)


def import_module_graph(module: object, shape: tuple[int, ...], name: str,
                        allow_opaque: bool = False) -> ComputeGraph:
    """A user's module imported through ``torch.export`` (`export_import.from_export`), or
    through torch.fx (`torch_import.from_torch`) where torch.export cannot export or convert
    it and torch.fx can; when neither imports it, torch.export's one-line reason."""
    from simulator.workload.export_import import from_export
    from simulator.workload.torch_import import from_torch

    try:
        return from_export(module, shape, name=name, allow_opaque=allow_opaque)
    except UnsupportedOpError as err:
        try:
            return from_torch(module, shape, name=name, allow_opaque=allow_opaque)
        except (UnsupportedOpError, InputShapeError):
            raise err from None


def _build(factory: object, spec: str):  # noqa: ANN202 - torch.nn.Module or ComputeGraph
    import torch

    module = factory
    if callable(factory) and not isinstance(factory, (torch.nn.Module, ComputeGraph)):
        try:
            module = factory()
        except SystemExit as err:  # builtins:exit, or a factory calling sys.exit
            raise UnknownModelError(f"calling {spec!r} called exit({str(err.code)[:40]!r}) "
                                    "instead of returning a torch.nn.Module") from None
        except Exception as err:  # the user's code: report it in one line
            raise UnknownModelError(f"calling {spec!r} failed: {type(err).__name__}: "
                                    f"{err}") from err
    if not isinstance(module, (torch.nn.Module, ComputeGraph)):
        raise UnknownModelError(f"{spec!r} did not give a torch.nn.Module or a ComputeGraph "
                                f"(got {type(module).__name__})")
    return module


def _unknown(name: str) -> UnknownModelError:
    choices = list(catalog())
    close = difflib.get_close_matches(name.lower(), choices, n=3, cutoff=0.65)
    hint = f"; did you mean {', '.join(close)}?" if close else \
        f"; zoo networks: {', '.join(choices)}"
    return UnknownModelError(f"unknown model {name!r} (not a zoo name, an existing .onnx or "
                             f".json file, or module:callable){hint}")

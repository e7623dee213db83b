"""Checkpoints: the one reader of the validity GNN's and the explainers' trained parameters.

Every checkpoint is a ``.pt`` file of plain data only (tensors, numbers, strings, lists and
dicts), read with ``torch.load(..., weights_only=True)``, whose header names its ``format``
(`FORMATS`: the GNN, PGExplainer or RG-Explainer parameters) and the dataflow (``scheme``) it is
for. Loading refuses, with a one-line `CheckpointError`, a file that is missing, unreadable or
of another format or dataflow, a header lacking a key, and weights that do not fit the module
(never an unpickling or a torch traceback).

* The GNN (`save_checkpoint`, `load_checkpoint`): ``<scheme>.pt`` also holds the architecture
  and the feature schema version; ``<scheme>.json`` next to it holds the metadata people read
  (metrics, dataset statistics, training time, versions) and the SHA-256 of the state dict,
  which the weights must match (a tampered or mixed-up file is refused).
* The explainers (`save_explainer_checkpoint`, `load_explainer_checkpoint`): the header also
  holds the SHA-256 of the GNN they were trained on, which must be the GNN they explain, and
  the SHA-256 of their own state dict (``state_dict_sha256``), which the weights must match,
  as the GNN's must match its JSON: every kind is verified the same way (format, scheme,
  digest of the weights, strict loading).

Files are written through a temporary file and `os.replace`, never half.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from explain.features import FEATURE_SCHEMA_VERSION
from simulator.errors import InputError

if TYPE_CHECKING:
    import torch

    from explain.gnn import GnnSpec, ValidityGNN

__all__ = [
    "CHECKPOINT_DIR",
    "CHECKPOINT_FORMAT",
    "FORMATS",
    "GRAPH_STAGE_SUFFIX",
    "CheckpointError",
    "LoadedCheckpoint",
    "checkpoint_graph_stages",
    "graph_stages_of",
    "load_checkpoint",
    "load_explainer_checkpoint",
    "load_weights",
    "save_checkpoint",
    "save_explainer_checkpoint",
    "shipped_checkpoint",
    "state_dict_sha256",
]

CHECKPOINT_DIR = Path(__file__).resolve().parent / "checkpoints"
CHECKPOINT_FORMAT = "fusion-dse.gnn-checkpoint"
CHECKPOINT_FORMAT_VERSION = 1
FORMATS = {"gnn": CHECKPOINT_FORMAT, "pg": "fusion-dse.pg-explainer",
           "rg": "fusion-dse.rg-explainer"}
"""The ``format`` header of each kind of checkpoint."""
GRAPH_STAGE_SUFFIX = {"none": "", "fuse": "-fused"}
"""File-name suffix of the checkpoints trained for each graph stage (`explain.dataset.
TRAINED_GRAPH_STAGES`): ``lbdf.pt`` on the networks as imported, ``lbdf-fused.pt`` on them
after the fuse stage; likewise ``pg-lbdf(-fused).pt`` and ``rg-lbdf(-fused).pt``."""
_NAMES = {"gnn": "GNN", "pg": "PGExplainer", "rg": "RG-Explainer"}
_WHAT = {"gnn": "GNN checkpoint", "pg": "PGExplainer parameters",
         "rg": "RG-Explainer parameters"}


class CheckpointError(InputError):
    """A checkpoint that is missing, unreadable, tampered with or does not match the code."""


def state_dict_sha256(state: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 over the names, dtypes, shapes and bytes of the tensors, in name order."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """`write` a temporary file beside `path`, then move it onto `path`."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def graph_stages_of(graph: Any) -> str:
    """The trained graph stage whose checkpoints suit `graph` (a `ComputeGraph`): ``fuse`` if
    some op carries an activation epilogue (only the fuse stage's One-to-One fusion makes one,
    so a run with ``--graph-stages fuse`` or ``all`` searches such a graph, and one with
    ``none`` or ``fission`` does not; ``substitute`` alone gets ``fuse`` when its search
    applied that fusion), else ``none``."""
    return "fuse" if any(op.attr("epilogue") for op in graph) else "none"


def checkpoint_graph_stages(value: str | None) -> str:
    """`value` (None: ``none``) checked against the graph stages trained for."""
    name = "none" if value is None else str(value).strip().lower()
    if name not in GRAPH_STAGE_SUFFIX:
        raise CheckpointError(f"graph stage {value!r}: the GNN and the explainers are trained "
                              f"for {' or '.join(GRAPH_STAGE_SUFFIX)} only")
    return name


def shipped_checkpoint(scheme: str, graph_stages: str | None = "none") -> Path:
    """Path of the GNN checkpoint shipped in the repository for `scheme` and `graph_stages`
    (``none``: the networks as imported; ``fuse``: after the fuse stage)."""
    suffix = GRAPH_STAGE_SUFFIX[checkpoint_graph_stages(graph_stages)]
    return CHECKPOINT_DIR / f"{scheme}{suffix}.pt"


def save_checkpoint(path: str | Path, scheme: str, spec: GnnSpec,
                    state: Mapping[str, torch.Tensor], metadata: Mapping[str, Any],
                    graph_stages: str = "none") -> Path:
    """Write ``path`` (weights) and the JSON next to it; returns the JSON's path.

    Args:
        path: The ``.pt`` file to write.
        scheme: Dataflow the model classifies for.
        spec: Its architecture.
        state: Its state dict.
        metadata: Anything else for the JSON (metrics, dataset statistics, timings).
        graph_stages: The graph stage of the networks it was trained on (``none`` or
            ``fuse``), recorded in both files.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().clone() for k, v in state.items()}
    header = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_FORMAT_VERSION,
              "scheme": str(scheme),  # a plain str: a `Scheme` would not load weights-only
              "feature_schema_version": FEATURE_SCHEMA_VERSION,
              "architecture": spec.to_dict(),
              "graph_stages": checkpoint_graph_stages(graph_stages)}
    import torch

    _atomic_write(path, lambda tmp: torch.save({**header, "state_dict": state}, tmp))
    doc = {**header, "checkpoint": path.name, "state_dict_sha256": state_dict_sha256(state),
           **metadata}
    json_path = path.with_suffix(".json")
    _atomic_write(json_path, lambda tmp: tmp.write_text(json.dumps(doc, indent=2) + "\n"))
    return json_path


@dataclass(frozen=True)
class LoadedCheckpoint:
    """A verified checkpoint: the model in eval mode and its JSON metadata."""

    path: Path
    scheme: str
    model: ValidityGNN
    metadata: dict[str, Any]

    @property
    def graph_stages(self) -> str:
        """The graph stage it was trained for (files without the key: ``none``, they predate
        graph stages)."""
        return str(self.metadata.get("graph_stages", "none"))


def _where(path: Path, kind: str) -> str:
    return f"{_WHAT[kind]} {str(path)!r}"


def _read_payload(path: Path, kind: str) -> dict[str, Any]:
    """The header and weights of a checkpoint of `kind`, read as plain data only."""
    if not path.is_file():
        raise CheckpointError(f"{_where(path, kind)} does not exist")
    import torch

    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many types for a damaged or foreign file
        raise CheckpointError(f"{_where(path, kind)} is not a readable weights-only torch file "
                              f"({type(err).__name__})") from err
    if not isinstance(payload, dict) or payload.get("format") != FORMATS[kind]:
        raise CheckpointError(f"{str(path)!r} is not a fusion-dse {_NAMES[kind]} checkpoint")
    return payload


def _require(payload: Mapping[str, Any], keys: Sequence[str], where: str) -> None:
    missing = [k for k in keys if k not in payload]
    if missing:
        raise CheckpointError(f"{where} lacks {', '.join(map(repr, missing))} (damaged or "
                              "written by other code)")


def load_weights(module: torch.nn.Module, state: Any, where: str) -> torch.nn.Module:
    """`module` with `state` loaded strictly; a mismatch is a one-line `CheckpointError`.

    Args:
        module: The freshly built module.
        state: The checkpoint's state dict.
        where: What to name in the message (the checkpoint and its path).
    """
    if not isinstance(state, Mapping):
        raise CheckpointError(f"{where} holds no state dict")
    try:
        module.load_state_dict(state, strict=True)
    except (RuntimeError, KeyError, TypeError, ValueError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise CheckpointError(f"{where} does not fit the model: {first}") from err
    return module


def _read_metadata(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.with_suffix(".json").read_text())
    except (OSError, ValueError) as err:
        raise CheckpointError(f"GNN checkpoint {str(path)!r}: its metadata "
                              f"{path.with_suffix('.json').name!r} is missing or not JSON "
                              f"({type(err).__name__})") from err


def _check_header(path: Path, payload: Mapping[str, Any], meta: Mapping[str, Any],
                  scheme: str | None, graph_stages: str | None) -> None:
    from explain.gnn import GnnSpec

    where = _where(path, "gnn")
    for doc in (payload, meta):
        version = doc.get("feature_schema_version")
        if version != FEATURE_SCHEMA_VERSION:
            raise CheckpointError(f"{where} was trained on feature schema {version!r}, this code "
                                  f"encodes schema {FEATURE_SCHEMA_VERSION}; retrain it "
                                  "(fusion-dse train-gnn)")
        if doc.get("architecture") != GnnSpec().to_dict():
            raise CheckpointError(f"{where} has architecture {doc.get('architecture')!r}, this "
                                  f"code builds {GnnSpec().to_dict()!r}; retrain it")
    if payload.get("scheme") != meta.get("scheme"):
        raise CheckpointError(f"{where}: weights are for {payload.get('scheme')!r} but its JSON "
                              f"says {meta.get('scheme')!r}")
    if scheme is not None and payload.get("scheme") != scheme:
        raise CheckpointError(f"{where} classifies {payload.get('scheme')!r} groups, not "
                              f"{scheme!r}")
    stages = [doc.get("graph_stages", "none") for doc in (payload, meta)]
    if stages[0] != stages[1]:
        raise CheckpointError(f"{where}: weights are for graph stage {stages[0]!r} but its "
                              f"JSON says {stages[1]!r}")
    if graph_stages is not None and stages[0] != graph_stages:
        raise CheckpointError(f"{where} was trained on graphs after stage {stages[0]!r}, not "
                              f"{graph_stages!r}")


def load_checkpoint(path: str | Path, scheme: str | None = None,
                    graph_stages: str | None = None) -> LoadedCheckpoint:
    """Load and verify a checkpoint.

    Args:
        path: The ``.pt`` file (its ``.json`` must lie next to it).
        scheme: If given, the dataflow the checkpoint must be for.
        graph_stages: If given, the graph stage it must have been trained for (a file that
            records none was trained on the networks as imported, ``none``).

    Raises:
        CheckpointError: One line saying what does not match.
    """
    path = Path(path)
    payload = _read_payload(path, "gnn")
    meta = _read_metadata(path)
    _check_header(path, payload, meta, scheme, graph_stages)
    state = payload.get("state_dict")
    _check_weights(state, meta.get("state_dict_sha256"), _where(path, "gnn"))
    from explain.gnn import GnnSpec, ValidityGNN

    model = load_weights(ValidityGNN(GnnSpec()), state, _where(path, "gnn"))
    return LoadedCheckpoint(path, str(payload["scheme"]), model.eval(), meta)


# --- explainer parameters ---------------------------------------------------------------------


def _gnn_sha256(gnn: LoadedCheckpoint) -> str:
    return str(gnn.metadata.get("state_dict_sha256", ""))


def save_explainer_checkpoint(path: str | Path, kind: str, gnn: LoadedCheckpoint,
                              state: Mapping[str, torch.Tensor], **fields: Any) -> Path:
    """Write an explainer's trained parameters (weights only) for the GNN they explain.

    Args:
        path: The ``.pt`` file to write (its folder is created).
        kind: ``"pg"`` or ``"rg"``.
        gnn: The GNN the parameters were trained to explain (its dataflow, graph stage and
            digest are recorded).
        state: The explainer's state dict.
        **fields: Hyper-parameters and training figures (plain data).

    Returns:
        `path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().cpu().clone() for k, v in state.items()}
    payload = {"format": FORMATS[kind], "scheme": str(gnn.scheme),
               "graph_stages": gnn.graph_stages, "gnn_sha256": _gnn_sha256(gnn),
               "state_dict_sha256": state_dict_sha256(weights),
               "state_dict": weights, **fields}
    import torch

    _atomic_write(path, lambda tmp: torch.save(payload, tmp))
    return path


def _check_weights(state: Any, recorded: Any, where: str) -> None:
    """The state dict is tensors whose SHA-256 is `recorded`."""
    import torch

    if (not isinstance(state, dict)
            or not all(isinstance(t, torch.Tensor) for t in state.values())
            or state_dict_sha256(state) != recorded):
        raise CheckpointError(f"{where}: the weights do not match the SHA-256 recorded with "
                              "them (tampered with or damaged)")


def load_explainer_checkpoint(path: str | Path, kind: str, scheme: str,
                              gnn: Callable[[], LoadedCheckpoint],
                              keys: Sequence[str] = ()) -> dict[str, Any]:
    """Read and verify an explainer's parameters: format, dataflow and the GNN they explain.

    Args:
        path: The ``.pt`` file.
        kind: ``"pg"`` or ``"rg"``.
        scheme: The dataflow the parameters must be for.
        gnn: Returns the GNN to be explained (called once the file is known to be for
            `scheme`); the parameters must have been trained on it (same state-dict SHA-256).
        keys: Header keys the caller needs besides ``state_dict``.

    Returns:
        The header and ``state_dict`` (load it with `load_weights`); the state dict's SHA-256
        has been checked against ``state_dict_sha256``.

    Raises:
        CheckpointError: One line saying what does not match.
    """
    path = Path(path)
    where = _where(path, kind)
    payload = _read_payload(path, kind)
    _require(payload, ("scheme", "gnn_sha256", "state_dict_sha256", "state_dict", *keys), where)
    _check_weights(payload["state_dict"], payload["state_dict_sha256"], where)
    if payload["scheme"] != scheme:
        raise CheckpointError(f"{where} explain {payload['scheme']!r} groups, not {scheme!r}")
    if payload["gnn_sha256"] != _gnn_sha256(gnn()):
        raise CheckpointError(f"{where} were trained on another {scheme} GNN; retrain them "
                              "(fusion-dse train-explainer)")
    return payload

"""Checkpoints of the validity GNN: saving, verified loading, and the shipped ones.

A checkpoint is two files: ``<scheme>.pt`` holds plain data only (the state dict, the
architecture, the feature schema version, the dataflow), so it loads with
``torch.load(..., weights_only=True)``; ``<scheme>.json`` next to it holds the metadata people
read (metrics, dataset statistics, training time, versions) and the SHA-256 of the state dict.
Loading refuses, with a one-line `CheckpointError`, a file that is missing or unreadable, a
feature schema or architecture other than this code's, another dataflow than asked for, or
weights whose hash differs from the one recorded (a tampered or mixed-up file).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from explain.features import FEATURE_SCHEMA_VERSION
from explain.gnn import GnnSpec, ValidityGNN
from simulator.errors import InputError

__all__ = [
    "CHECKPOINT_DIR",
    "CHECKPOINT_FORMAT",
    "CheckpointError",
    "LoadedCheckpoint",
    "load_checkpoint",
    "save_checkpoint",
    "shipped_checkpoint",
    "state_dict_sha256",
]

CHECKPOINT_DIR = Path(__file__).resolve().parent / "checkpoints"
CHECKPOINT_FORMAT = "fusion-dse.gnn-checkpoint"
CHECKPOINT_FORMAT_VERSION = 1


class CheckpointError(InputError):
    """A GNN checkpoint that is missing, unreadable, tampered with or does not match the code."""


def state_dict_sha256(state: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 over the names, dtypes, shapes and bytes of the tensors, in name order."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def shipped_checkpoint(scheme: str) -> Path:
    """Path of the checkpoint shipped in the repository for `scheme`."""
    return CHECKPOINT_DIR / f"{scheme}.pt"


def save_checkpoint(path: str | Path, scheme: str, spec: GnnSpec,
                    state: Mapping[str, torch.Tensor], metadata: Mapping[str, Any]) -> Path:
    """Write ``path`` (weights) and the JSON next to it; returns the JSON's path.

    Args:
        path: The ``.pt`` file to write.
        scheme: Dataflow the model classifies for.
        spec: Its architecture.
        state: Its state dict.
        metadata: Anything else for the JSON (metrics, dataset statistics, timings).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().clone() for k, v in state.items()}
    header = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_FORMAT_VERSION,
              "scheme": scheme, "feature_schema_version": FEATURE_SCHEMA_VERSION,
              "architecture": spec.to_dict()}
    torch.save({**header, "state_dict": state}, path)
    doc = {**header, "checkpoint": path.name, "state_dict_sha256": state_dict_sha256(state),
           **metadata}
    json_path = path.with_suffix(".json")
    json_path.write_text(json.dumps(doc, indent=2) + "\n")
    return json_path


@dataclass(frozen=True)
class LoadedCheckpoint:
    """A verified checkpoint: the model in eval mode and its JSON metadata."""

    path: Path
    scheme: str
    model: ValidityGNN
    metadata: dict[str, Any]


def _read(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    if not path.is_file():
        raise CheckpointError(f"GNN checkpoint {str(path)!r} does not exist")
    try:
        meta = json.loads(path.with_suffix(".json").read_text())
    except (OSError, ValueError) as err:
        raise CheckpointError(f"GNN checkpoint {str(path)!r}: its metadata "
                              f"{path.with_suffix('.json').name!r} is missing or not JSON "
                              f"({type(err).__name__})") from err
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many types for a damaged or foreign file
        raise CheckpointError(f"GNN checkpoint {str(path)!r} is not a readable weights-only "
                              f"torch file ({type(err).__name__})") from err
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{str(path)!r} is not a fusion-dse GNN checkpoint")
    return payload, meta


def _check_header(path: Path, payload: Mapping[str, Any], meta: Mapping[str, Any],
                  scheme: str | None) -> None:
    where = f"GNN checkpoint {str(path)!r}"
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


def load_checkpoint(path: str | Path, scheme: str | None = None) -> LoadedCheckpoint:
    """Load and verify a checkpoint.

    Args:
        path: The ``.pt`` file (its ``.json`` must lie next to it).
        scheme: If given, the dataflow the checkpoint must be for.

    Raises:
        CheckpointError: One line saying what does not match.
    """
    path = Path(path)
    payload, meta = _read(path)
    _check_header(path, payload, meta, scheme)
    state = payload.get("state_dict")
    if not isinstance(state, dict) or state_dict_sha256(state) != meta.get("state_dict_sha256"):
        raise CheckpointError(f"GNN checkpoint {str(path)!r}: the weights do not match the "
                              "SHA-256 recorded in its JSON (tampered with or mixed up)")
    model = ValidityGNN(GnnSpec())
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        first = str(err).strip().splitlines()[0]
        raise CheckpointError(f"GNN checkpoint {str(path)!r} does not fit the model: "
                              f"{first}") from err
    return LoadedCheckpoint(path, str(payload["scheme"]), model.eval(), meta)

"""What is known of the zoo networks without building them: the catalog, read without torch.

The zoo (`simulator.workload.zoo`) is torch code: naming a network, checking a name or
listing the zoo must not pay for importing torch and building every module (what ``fusion-dse
models`` did before; benchmarks/cli_startup.py measures both). The catalog is a JSON file
shipped next to this module, ``zoo_catalog.json``: per network, in zoo order, its name, kind,
family, default input shape and the input axes a resolution (``name@R``) sets, and the figures
``fusion-dse models`` prints (ops and convs of the imported graph, parameters as torchvision
counts them, weights after BatchNorm folding, MACs, activation elements).

The file is made from the zoo by `measure_catalog` (``python -m simulator.workload.zoo_catalog
--write``); a test measures the zoo again and fails when the file differs, so it cannot go
stale. This module imports torch only inside `measure` / `measure_catalog`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["CATALOG_FORMAT", "CATALOG_PATH", "ZooFacts", "catalog", "measure",
           "measure_catalog", "resolution_shape", "write_catalog"]

CATALOG_PATH = Path(__file__).resolve().with_name("zoo_catalog.json")
CATALOG_FORMAT = "fusion-dse.zoo-catalog"
_VERSION = 1


@dataclass(frozen=True)
class ZooFacts:
    """The static facts of one zoo network.

    Attributes:
        name, kind, family, input_shape, resolution_axes: As its `zoo.ZooEntry`.
        ops: Ops of the imported graph at `input_shape`.
        convs: Convolutions among them (depthwise included).
        params: Parameters of the module, as torchvision counts them.
        weights: Weight elements of the graph (BatchNorm folded).
        macs: Multiply-accumulates of one inference.
        activation_elems: Elements of every activation tensor of the graph.
    """

    name: str
    kind: str
    family: str
    input_shape: tuple[int, ...]
    resolution_axes: tuple[int, ...]
    ops: int
    convs: int
    params: int
    weights: int
    macs: int
    activation_elems: int

    def to_dict(self) -> dict[str, Any]:
        """The catalog entry (tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> ZooFacts:
        """The entry of a catalog document."""
        values = {f.name: doc[f.name] for f in fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


@cache
def catalog() -> dict[str, ZooFacts]:
    """The shipped catalog, by zoo name, in zoo order (read once)."""
    doc = json.loads(CATALOG_PATH.read_text("utf-8"))
    if doc.get("format") != CATALOG_FORMAT or doc.get("version") != _VERSION:
        raise RuntimeError(f"{CATALOG_PATH} is not a version-{_VERSION} zoo catalog")
    return {m["name"]: ZooFacts.from_dict(m) for m in doc["models"]}


def resolution_shape(name: str, default: Sequence[int], axes: Sequence[int],
                     resolution: Sequence[int],
                     base: Sequence[int] | None = None) -> tuple[int, ...]:
    """`base` (default `default`) with the resolution `axes` set to `resolution`: one value
    for every axis (``resnet50@320``, ``bert_base@512``) or one per axis
    (``resnet50@320x240``). `zoo.ZooEntry.shape_at` is this function.

    Raises:
        ValueError: A resolution of another length, or a base shape without the axes.
    """
    shape = list(base if base is not None else default)
    values = tuple(resolution)
    if len(values) == 1:
        values *= len(axes)
    if max(axes) >= len(shape):
        raise ValueError(f"{name}@... sets axes {tuple(axes)} of the input shape, which "
                         f"{tuple(shape)} does not have")
    if len(values) != len(axes):
        what = "an image size H or HxW" if len(axes) == 2 else "one sequence length"
        raise ValueError(f"{name}@... takes {what}, not {'x'.join(str(v) for v in resolution)}")
    for axis, value in zip(axes, values, strict=True):
        shape[axis] = int(value)
    return tuple(shape)


def measure(name: str) -> ZooFacts:
    """The facts of zoo network `name`, measured: the module built and imported (torch)."""
    from simulator.workload.graph import OpKind
    from simulator.workload.loader import import_zoo_entry
    from simulator.workload.zoo import ZOO

    entry = ZOO[name]
    module = entry.build(entry.input_shape)
    graph = import_zoo_entry(entry, tuple(entry.input_shape))
    return ZooFacts(name=name, kind=entry.kind, family=entry.family,
                    input_shape=tuple(entry.input_shape),
                    resolution_axes=tuple(entry.resolution_axes), ops=len(graph),
                    convs=graph.count(OpKind.CONV, OpKind.DWCONV),
                    params=sum(p.numel() for p in module.parameters()),
                    weights=graph.total_weights, macs=graph.total_macs,
                    activation_elems=graph.activation_elems)


def measure_catalog() -> dict[str, Any]:
    """The catalog document of the zoo as the code builds it now (every network built)."""
    from simulator.workload.zoo import ZOO

    return {"format": CATALOG_FORMAT, "version": _VERSION,
            "made_by": "python -m simulator.workload.zoo_catalog --write",
            "models": [measure(name).to_dict() for name in ZOO]}


def write_catalog(path: Path = CATALOG_PATH) -> Path:
    """Measure the zoo and write the catalog to `path`."""
    path.write_text(json.dumps(measure_catalog(), indent=1) + "\n", "utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m simulator.workload.zoo_catalog [--write]``: check (or rewrite) the file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {CATALOG_PATH.name}")
    args = parser.parse_args(argv)
    if args.write:
        print(f"wrote {write_catalog()}")
        return 0
    fresh = measure_catalog()
    shipped = json.loads(CATALOG_PATH.read_text("utf-8"))
    if fresh != shipped:
        print(f"{CATALOG_PATH.name} is stale: rerun with --write", file=sys.stderr)
        return 1
    print(f"{CATALOG_PATH.name} matches the zoo")
    return 0


if __name__ == "__main__":
    sys.exit(main())

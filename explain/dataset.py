"""The fusion-group dataset: random-search groups of zoo networks labelled by the cost model.

Following Mills et al. §IV-A, random partition-plan proposals (`explain.sampling`) of each
network give distinct fusion groups of 2..30 ops; the cost model of the dataflow labels every
group valid (F_beta <= buffer, `GroupCost.fits`) or invalid at each buffer size of
`BUFFER_SIZES_KIB` of the hardware the caller passes (its buffer overridden; the shipped GNNs were
trained on the ``edge-npu`` preset), so each group yields five samples. Groups are
distinct as subgraphs: a group whose encoding equals one already collected from the same network
(a copy from a repeated block) is skipped, so identical samples cannot straddle a split.

BRR runs only on networks without squeeze-and-excitation (the paper's choice; BRR cannot tile a
group that broadcasts a globally pooled vector back onto a feature map), so its default networks
are the SE-free training networks, with larger quotas to reach the paper's 10.8k groups.

Generation is deterministic in `DatasetConfig.seed`: every network gets its own generator,
``np.random.default_rng([seed, crc32(name)])``, so a network's groups do not depend on which
other networks are in the set (and the LBDF groups of a network are a prefix of its BRR
groups). Nothing touches a global random state. Results are cached on disk under
``$FUSION_DSE_CACHE`` (default ``~/.cache/fusion-dse``) in ``gnn-datasets/<key>.npz``, keyed
by a hash of the configuration, the feature schema version and the source of the cost models,
the IR and the sampler, so editing any of them regenerates.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

import simulator.cost
import simulator.workload
from explain import defaults
from explain.batch import PackedGraphs
from explain.checkpoint import GRAPH_STAGE_SUFFIX, checkpoint_graph_stages
from explain.features import FEATURE_SCHEMA_VERSION, GroupGraph, content_digest, encode_group
from explain.sampling import sample_groups
from simulator.cost import CostCache
from simulator.cost.brr import incompatibility
from simulator.dataflow import dataflow
from simulator.errors import InputError
from simulator.hw import HardwareConfig
from simulator.partition import Group
from simulator.scheme import FUSED_SCHEMES, Scheme, fused_schemes
from simulator.workload.graph import ComputeGraph
from simulator.workload.loader import load_zoo, resolve_zoo_name

__all__ = [
    "BUFFER_SIZES_KIB",
    "DATASET_FORMAT_VERSION",
    "DEFAULT_GROUPS",
    "HELD_OUT_GROUPS",
    "HELD_OUT_NETWORKS",
    "TRAINED_GRAPH_STAGES",
    "TRAINING_NETWORKS",
    "Dataset",
    "DatasetConfig",
    "build_dataset",
    "cache_key",
    "cached_dataset",
    "check_graph_stages",
    "default_cache_dir",
    "generate_dataset",
    "has_squeeze_excitation",
    "held_out_config",
    "label_groups",
    "load_network",
    "network_rng",
    "training_config",
]

DATASET_FORMAT_VERSION = 1
BUFFER_SIZES_KIB: tuple[int, ...] = (128, 256, 512, 1024, 2048)
TRAINING_NETWORKS: tuple[str, ...] = (
    "vgg16", "squeezenet1_0", "squeezenet1_1", "mobilenet_v2", "mobilenet_v3_small",
    "mobilenet_v3_large", "resnet18", "resnet101", "efficientnet_b0", "efficientnet_b3",
)
HELD_OUT_NETWORKS: tuple[str, ...] = ("resnet50", "resnet152", "deeplabv3_mobilenet_v3_large")
HELD_OUT_GROUPS = defaults.HELD_OUT_GROUPS
TRAINED_GRAPH_STAGES: tuple[str, ...] = tuple(GRAPH_STAGE_SUFFIX)
"""The graph stages a dataset (and so a checkpoint) can be built for: the networks as imported
(``none``) or after DNNFusion's fuse stage (``fuse``, `search.substitution.stages`), which needs
no machine; the stages that do (fission, substitute) are not trained for (docs/gnn.md)."""

class _TrainingGroups(Mapping[str, Mapping[str, int]]):
    """Each GNN dataflow's training networks (`Dataflow.training_groups`), by scheme."""

    def __getitem__(self, scheme: str) -> Mapping[str, int]:
        return dataflow(Scheme.parse(scheme, fused_schemes())).training_groups

    def __iter__(self) -> Iterator[str]:
        return iter(fused_schemes())

    def __len__(self) -> int:
        return len(fused_schemes())


DEFAULT_GROUPS: Mapping[str, Mapping[str, int]] = _TrainingGroups()
"""Distinct groups wanted per training network (VGG16 has about 630 of 2..30 ops in all)."""

_SE_FREE = ("vgg16", "squeezenet1_0", "squeezenet1_1", "mobilenet_v2", "resnet18", "resnet50",
            "resnet101", "resnet152")


@dataclass(frozen=True)
class DatasetConfig:
    """What to generate; validated on construction.

    Attributes:
        scheme: Dataflow whose cost model labels the groups: LBDF or BRR (or its name).
        networks: (zoo name, distinct groups wanted) pairs.
        buffers_kib: Buffer sizes each group is labelled at.
        seed: Seed of the sampling.
        min_ops, max_ops: Group sizes kept.
        patience: Proposals in a row without a new group before a network counts as exhausted.
        hw: Hardware whose buffer is overridden by each of `buffers_kib` (keyword only).
        graph_stages: The graph stage the networks are sampled after (keyword only; one of
            `TRAINED_GRAPH_STAGES`): ``none`` (as imported) or ``fuse``.
    """

    scheme: Scheme
    networks: tuple[tuple[str, int], ...]
    buffers_kib: tuple[int, ...] = BUFFER_SIZES_KIB
    seed: int = 0
    min_ops: int = 2
    max_ops: int = 30
    patience: int = 3000
    hw: HardwareConfig = field(kw_only=True)
    graph_stages: str = field(default="none", kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scheme", Scheme.parse(self.scheme, FUSED_SCHEMES))
        object.__setattr__(self, "graph_stages", check_graph_stages(self.graph_stages))
        if not self.networks:
            raise InputError("a dataset needs at least one network")
        for name, count in self.networks:
            if resolve_zoo_name(name) != name:
                raise InputError(f"dataset network {name!r} is not a zoo name")
            if not isinstance(count, int) or count <= 0:
                raise InputError(f"groups wanted for {name!r} must be a positive integer, "
                                 f"got {count!r}")
        if len({n for n, _ in self.networks}) != len(self.networks):
            raise InputError("a dataset network is listed twice")
        if not self.buffers_kib or any(b <= 0 for b in self.buffers_kib):
            raise InputError(f"buffer sizes must be positive KiB, got {self.buffers_kib}")
        if not 1 <= self.min_ops <= self.max_ops:
            raise InputError(f"group sizes must satisfy 1 <= min_ops <= max_ops, got "
                             f"{self.min_ops}..{self.max_ops}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; the hardware by its name (`cache_key` hashes all its values)."""
        d = asdict(self)
        d["networks"] = [list(p) for p in self.networks]
        d["buffers_kib"] = list(self.buffers_kib)
        d["hw"] = self.hw.name
        if self.graph_stages == "none":  # as before graph stages existed: same cache keys
            del d["graph_stages"]
        return d


check_graph_stages = checkpoint_graph_stages
"""`value` (None: ``none``) if it is one of `TRAINED_GRAPH_STAGES`, else an `InputError`
(`explain.checkpoint.checkpoint_graph_stages`: one check for datasets and checkpoints)."""


def load_network(name: str, graph_stages: str = "none") -> ComputeGraph:
    """Zoo network `name` after `graph_stages` (``none``: as imported; ``fuse``: DNNFusion's
    fuse stage, as ``fusion-dse optimize --graph-stages fuse`` searches it)."""
    graph = load_zoo(name)
    if check_graph_stages(graph_stages) == "none":
        return graph
    from search.substitution.stages import run_stages

    return run_stages(graph, graph_stages).graph


def training_config(scheme: str, seed: int = 0, groups: Mapping[str, int] | None = None, *,
                    hw: HardwareConfig, graph_stages: str = "none") -> DatasetConfig:
    """The paper's training set for `scheme`, with optional per-network group counts.

    Args:
        scheme: "lbdf" or "brr".
        seed: Seed of the sampling.
        groups: Overrides of `DEFAULT_GROUPS` (a count of 0 drops the network).
        hw: Hardware labelling the groups (its buffer overridden by each buffer size).
        graph_stages: ``none`` (the networks as imported) or ``fuse``.
    """
    scheme = Scheme.parse(scheme, FUSED_SCHEMES)
    counts = dict(DEFAULT_GROUPS[scheme])
    for name, count in (groups or {}).items():
        key = resolve_zoo_name(name) or name
        if key not in counts:  # the training networks the scheme can run
            allowed = ", ".join(DEFAULT_GROUPS[scheme])
            raise InputError(f"{name!r} is not a {scheme} training network (one of {allowed})")
        counts[key] = int(count)
    return DatasetConfig(scheme, tuple((n, c) for n, c in counts.items() if c > 0), seed=seed,
                         hw=hw, graph_stages=graph_stages)


def held_out_config(scheme: str, seed: int = 0, groups_per_network: int = HELD_OUT_GROUPS, *,
                    hw: HardwareConfig, graph_stages: str = "none") -> DatasetConfig:
    """Groups of the networks never trained on (BRR: the SE-free ones), labelled on `hw`."""
    scheme = Scheme.parse(scheme, FUSED_SCHEMES)
    names = [n for n in HELD_OUT_NETWORKS if not scheme.tiled or n in _SE_FREE]
    return DatasetConfig(scheme, tuple((n, groups_per_network) for n in names), seed=seed,
                         hw=hw, graph_stages=graph_stages)


@dataclass(frozen=True)
class Dataset:
    """Labelled fusion groups of one dataflow.

    Attributes:
        config: What was generated.
        networks: Network names; `network_index` points into it.
        network_index: (groups,) network of every group.
        ops: Op ids of every group in its network.
        labels: (groups, buffers) True where the group fits the buffer.
        need_bytes: (groups, buffers) F_beta at each buffer (BRR's tiling depends on it).
        packed: The encoded groups.
        seconds: Generation time (of the original run when loaded from the cache).
        network_seconds: Generation time per network.
        from_cache: True if read from the disk cache.
    """

    config: DatasetConfig
    networks: tuple[str, ...]
    network_index: np.ndarray
    ops: tuple[Group, ...]
    labels: np.ndarray
    need_bytes: np.ndarray
    packed: PackedGraphs
    seconds: float
    network_seconds: tuple[float, ...]
    from_cache: bool = False

    @property
    def buffer_bytes(self) -> np.ndarray:
        """(buffers,) the buffer sizes in bytes."""
        return np.array(self.config.buffers_kib, dtype=np.int64) * 1024

    @property
    def num_groups(self) -> int:
        """Distinct groups."""
        return len(self.ops)

    @property
    def num_samples(self) -> int:
        """Groups times buffer sizes."""
        return int(self.labels.size)

    def samples(self, groups: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(group index, buffer index) of every sample of `groups` (default: all)."""
        g = np.arange(self.num_groups) if groups is None else np.asarray(groups, np.int64)
        n_buf = len(self.config.buffers_kib)
        return np.repeat(g, n_buf), np.tile(np.arange(n_buf), len(g))


def network_rng(seed: int, name: str) -> np.random.Generator:
    """The generator of one network's sampling (independent of the other networks)."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def has_squeeze_excitation(graph: ComputeGraph) -> bool:
    """True if some op broadcasts a globally pooled vector back onto a feature map."""
    return bool(incompatibility(graph, range(len(graph))))


def _hardware(config: DatasetConfig) -> list[HardwareConfig]:
    return [config.hw.with_overrides(buffer=f"{kib}KiB") for kib in config.buffers_kib]


def label_groups(graph: ComputeGraph, groups: Sequence[Group], scheme: str,
                 hws: Sequence[HardwareConfig]) -> tuple[np.ndarray, np.ndarray]:
    """(groups, buffers) validity and F_beta of every group on every hardware config."""
    labels = np.zeros((len(groups), len(hws)), dtype=bool)
    need = np.zeros((len(groups), len(hws)), dtype=np.int64)
    for b, hw in enumerate(hws):
        cache = CostCache(graph, hw, scheme)
        for k, g in enumerate(groups):
            cost = cache.group(g)
            labels[k, b], need[k, b] = cost.fits, cost.buffer_bytes
    return labels, need


@dataclass(frozen=True)
class _Part:
    groups: list[Group]
    encoded: list[GroupGraph]
    labels: np.ndarray
    need: np.ndarray


def _network_part(config: DatasetConfig, name: str, count: int,
                  hws: Sequence[HardwareConfig]) -> _Part:
    graph = load_network(name, config.graph_stages)
    if config.scheme.tiled and has_squeeze_excitation(graph):
        raise InputError(f"network {name!r} has squeeze-and-excitation, which BRR cannot tile; "
                         "leave it out of a BRR dataset")
    encoded: dict[Group, GroupGraph] = {}

    def key(group: Group) -> bytes:
        encoded[group] = encode_group(graph, group, hws[0].dtype_bytes)
        return content_digest(encoded[group])

    groups = sample_groups(graph, count, network_rng(config.seed, name),
                           min_ops=config.min_ops, max_ops=config.max_ops,
                           patience=config.patience, key=key)
    labels, need = label_groups(graph, groups, config.scheme, hws)
    return _Part(groups, [encoded[g] for g in groups], labels, need)


def generate_dataset(config: DatasetConfig, progress: bool = False) -> Dataset:
    """Sample, label and encode the groups of `config` (no cache)."""
    start = time.perf_counter()
    hws = _hardware(config)
    parts, seconds = [], []
    for name, count in tqdm(config.networks, desc=f"{config.scheme} dataset", unit="net",
                            disable=not progress):
        t0 = time.perf_counter()
        parts.append(_network_part(config, name, count, hws))
        seconds.append(time.perf_counter() - t0)
    return Dataset(
        config=config,
        networks=tuple(n for n, _ in config.networks),
        network_index=np.repeat(np.arange(len(parts)), [len(p.groups) for p in parts]),
        ops=tuple(g for p in parts for g in p.groups),
        labels=np.concatenate([p.labels for p in parts]),
        need_bytes=np.concatenate([p.need for p in parts]),
        packed=PackedGraphs.pack([e for p in parts for e in p.encoded]),
        seconds=time.perf_counter() - start,
        network_seconds=tuple(seconds),
    )


# --- the disk cache -------------------------------------------------------------------------

def default_cache_dir() -> Path:
    """``$FUSION_DSE_CACHE`` or ``~/.cache/fusion-dse`` (read at call time)."""
    root = os.environ.get("FUSION_DSE_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "fusion-dse"


def _source_fingerprint() -> str:
    """Hash of the code the labels and encodings depend on."""
    roots = [Path(simulator.cost.__file__).parent, Path(simulator.workload.__file__).parent]
    files = sorted(p for r in roots for p in r.rglob("*.py"))
    here = Path(__file__).parent
    files += [here / "features.py", here / "sampling.py", here / "dataset.py"]
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.parent.name}/{f.name}".encode() + f.read_bytes())
    return h.hexdigest()


def cache_key(config: DatasetConfig) -> str:
    """Hash of everything generation depends on: parameters, hardware, versions, code."""
    hw = config.hw.to_dict()
    hw.pop("buffer_bytes")
    if hw.get("buffer_pj_from_sram"):  # the SRAM model's energy follows the buffer's capacity
        hw.pop("energy_buffer_pj_per_byte")
    doc = {"config": config.to_dict(), "hw": hw, "feature_schema": FEATURE_SCHEMA_VERSION,
           "format": DATASET_FORMAT_VERSION, "code": _source_fingerprint()}
    if config.graph_stages != "none":  # the rewrite rules shape the graphs sampled
        import search.substitution

        rules = sorted(Path(search.substitution.__file__).parent.rglob("*.py"))
        doc["stages_code"] = hashlib.sha256(b"".join(
            f"{f.relative_to(f.parents[1])}".encode() + f.read_bytes() for f in rules)).hexdigest()
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:24]


def _arrays(ds: Dataset) -> dict[str, np.ndarray]:
    lengths = np.array([len(g) for g in ds.ops], dtype=np.int64)
    return {
        "network_index": ds.network_index, "labels": ds.labels, "need_bytes": ds.need_bytes,
        "ops": np.concatenate([np.array(g, np.int64) for g in ds.ops]) if ds.ops
        else np.zeros(0, np.int64),
        "ops_ptr": np.concatenate(([0], np.cumsum(lengths))),
        "base": ds.packed.base, "sizes": ds.packed.sizes, "edges": ds.packed.edges,
        "node_ptr": ds.packed.node_ptr, "edge_ptr": ds.packed.edge_ptr,
    }


def _save(ds: Dataset, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
    np.savez_compressed(tmp, **_arrays(ds))
    meta = {"config": ds.config.to_dict(), "seconds": ds.seconds,
            "network_seconds": list(ds.network_seconds), "feature_schema": FEATURE_SCHEMA_VERSION,
            "format": DATASET_FORMAT_VERSION}
    path.with_suffix(".json").write_text(json.dumps(meta, indent=2))
    os.replace(tmp, path)


def _load(path: Path, config: DatasetConfig) -> Dataset | None:
    try:
        meta = json.loads(path.with_suffix(".json").read_text())
        with np.load(path, allow_pickle=False) as z:
            a = {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError):
        return None  # a missing or damaged entry is regenerated
    if meta["config"] != config.to_dict():
        return None
    ptr = a["ops_ptr"]
    return Dataset(
        config=config, networks=tuple(n for n, _ in config.networks),
        network_index=a["network_index"],
        ops=tuple(tuple(int(o) for o in a["ops"][ptr[k]:ptr[k + 1]])
                  for k in range(len(ptr) - 1)),
        labels=a["labels"], need_bytes=a["need_bytes"],
        packed=PackedGraphs(a["base"], a["sizes"], a["edges"], a["node_ptr"], a["edge_ptr"]),
        seconds=float(meta["seconds"]), network_seconds=tuple(meta["network_seconds"]),
        from_cache=True,
    )


def _cache_path(config: DatasetConfig, cache_dir: Path | str | None) -> Path:
    return Path(cache_dir or default_cache_dir()) / "gnn-datasets" / f"{cache_key(config)}.npz"


def cached_dataset(config: DatasetConfig, cache_dir: Path | str | None = None) -> Dataset | None:
    """The dataset of `config` if the disk cache has it, else None (nothing is generated)."""
    path = _cache_path(config, cache_dir)
    return _load(path, config) if path.exists() else None


def build_dataset(config: DatasetConfig, *, cache_dir: Path | str | None = None,
                  use_cache: bool = True, progress: bool = False) -> Dataset:
    """The dataset of `config`, from the disk cache when an entry for it exists.

    Args:
        config: What to generate.
        cache_dir: Cache root (default: `default_cache_dir`).
        use_cache: False generates afresh and writes nothing.
        progress: Show a progress bar over the networks.
    """
    if not use_cache:
        return generate_dataset(config, progress)
    cached = cached_dataset(config, cache_dir)
    if cached is not None:
        return cached
    ds = generate_dataset(config, progress)
    try:
        _save(ds, _cache_path(config, cache_dir))
    except OSError:
        pass  # a read-only cache costs time, not correctness
    return ds

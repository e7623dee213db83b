"""Sweep specifications: axes, their parsing, the product with include/exclude, validation.

A spec names axes and their values; the sweep is the product of the axes, minus the
``exclude`` entries, plus the ``include`` entries (the GitHub Actions matrix rules, which
extend pytest's stacked ``parametrize`` products with explicit additions and removals):

* an ``exclude`` entry is a partial point; every point of the product matching all of its
  axes is removed;
* an ``include`` entry replaces some axes' values and is expanded as a product over all the
  other axes; its points are added after the exclusions (an include wins).

Axis values are YAML lists, scalars or strings: ``a,b,c`` (a list), ``0..4`` (integers, both
ends included), ``64KiB..2MiB:x2`` (a geometric range), ``0..100:25`` (an arithmetic range).
Points of scheme ``lbl`` have nothing to search: their search, repair, objectives, budget and
seed are dropped, so a product gives one layer-by-layer point per model, hardware and graph
stages (they keep the graph stages: the layer-by-layer plan is costed on the graph the searched
points run on).

Everything is checked before anything runs (`validate_points`): each problem is one line
quoting the bad value, all collected into one `InputError`. The limits of
`simulator.limits` hold before anything is expanded: a spec file is read with
`limits.read_text` and `simulator.hw.load_yaml` (size, encoding, regular file, depth, aliases,
duplicate keys); every axis value is a scalar; a range is counted before it is expanded
(`limits.MAX_AXIS_VALUES`), and so is the sweep's number of points, the product of its axes'
lengths (`count_points`, `limits.MAX_SWEEP_POINTS`); an empty axis is refused; a sweep name
(`check_name`) is a plain file name unless the store is given as a path.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from fusion_dse.runspec import RunSpec, run_defaults
from simulator import limits
from simulator.errors import InputError

if TYPE_CHECKING:
    from simulator.workload.graph import ComputeGraph

__all__ = [
    "AXES",
    "HW_AXES",
    "Point",
    "SweepError",
    "SweepSpec",
    "canonical_axis",
    "check_name",
    "count_points",
    "expand",
    "hardware_axes",
    "load_spec",
    "parse_axis",
    "spec_from_flags",
    "validate_points",
]

AXES = ("model", "hw", "scheme", "search", "repair", "objectives", "budget", "seed",
        "input_shape", "graph_stages")
"""The run axes (anything else is a hardware field, see `hardware_axes`)."""

_ALIASES = {"models": "model", "schemes": "scheme", "searches": "search", "repairs": "repair",
            "seeds": "seed", "budgets": "budget", "buffers": "buffer", "hws": "hw",
            "stages": "graph_stages"}
_DEFAULTS: dict[str, Any] = {axis: run_defaults()[f"run.{axis}"] for axis in AXES
                             if axis != "model"}
"""A point's settings its axes leave out: a run's defaults (`fusion_dse.runspec.RunSpec`)."""
_INT_AXES = {"budget", "seed", "dtype_bytes", "dram_latency", "macs_per_cycle",
             "sram.node_nm", "sram.banks", "sram.word_bytes"}
_SIZE_AXES = {"buffer", "buffer_bytes", "weight_buffer", "weight_buffer_bytes",
              "activation_buffer", "activation_buffer_bytes"}
_RANGE = re.compile(r"^(?P<lo>[^.]+?)\s*\.\.\s*(?P<hi>[^:]+?)\s*(?::\s*(?P<step>x?[\d.eE+-]+))?$")


def hardware_axes() -> tuple[str, ...]:
    """Hardware fields usable as axes: the YAML keys (``energy.X`` and ``sram.X`` for the
    sections' fields, `simulator.hw.override_keys`) and the `HardwareConfig` field names."""
    from simulator.hw import HardwareConfig, override_keys

    names = [f.name for f in dataclasses.fields(HardwareConfig)
             if f.name not in ("name", "description", "source", "sram")]
    return tuple(dict.fromkeys([*override_keys(), *names]))


HW_AXES = ("buffer", "dram_bandwidth", "macs_per_cycle", "clock", "dram_latency",
           "buffer_bandwidth", "dtype_bytes")
"""The hardware axes documented first (every one of `hardware_axes()` is accepted)."""


@dataclass(frozen=True)
class Point:
    """One run of a sweep: a model on a hardware configuration under one search setting.

    ``overrides`` are the hardware axes as sorted (key, value) pairs. Points of a scheme with
    nothing to search (lbl) carry None for search, repair, objectives, budget and seed; they
    keep the graph stages, so that the layer-by-layer plan is costed on the graph the searched
    points run on (with the default ``fuse``, the same graph at every buffer and dataflow).
    ``graph_stages`` is a stage list as `search.substitution.stages.parse_stages` reads it
    (``fuse+fission`` is one value of the axis); ``none`` is left out of `to_dict`, so the
    keys of points stored before the axis existed are unchanged.
    """

    model: str
    hw: str
    scheme: str
    search: str | None
    repair: str | None
    objectives: str | None
    budget: int | None
    seed: int | None
    input_shape: str | None = None
    overrides: tuple[tuple[str, Any], ...] = ()
    graph_stages: str = "none"

    def to_dict(self) -> dict[str, Any]:
        """The point as a JSON-ready dict (overrides as a mapping; ``graph_stages`` only when
        some stage runs)."""
        doc = dataclasses.asdict(self)
        doc["overrides"] = dict(self.overrides)
        if self.graph_stages == "none":
            del doc["graph_stages"]
        return doc

    def run_spec(self, model: str | ComputeGraph | None = None) -> RunSpec:
        """The run of a searched point (`model`: the network it runs, by default its name;
        `fusion_dse.sweep.point.model_graph` gives it bound to ``input_shape``, which is then
        left out); the settings it has no axis for are `RunSpec`'s defaults.

        Raises:
            ValueError: a point of a scheme with nothing to search (it is evaluated).
        """
        if self.search is None or self.budget is None or self.seed is None:
            raise ValueError(f"point {self.label()!r} has nothing to search")
        model = self.model if model is None else model
        return RunSpec(model, self.hw, self.scheme, self.search, str(self.repair), self.budget,
                       self.seed, str(self.objectives), dict(self.overrides),
                       input_shape=self.input_shape if isinstance(model, str) else None,
                       graph_stages=self.graph_stages)

    def label(self) -> str:
        """A short human-readable name."""
        hw = ",".join(f"{k}={v}" for k, v in self.overrides)
        run = f"{self.search}+{self.repair} s{self.seed}" if self.search else ""
        stages = f" stages={self.graph_stages}" if self.graph_stages != "none" else ""
        return f"{self.model} {self.hw}[{hw}] {self.scheme} {run}{stages}".strip()


# --- axis values ----------------------------------------------------------------------------


def _scalar(axis: str, text: str) -> Any:
    """One value of `axis` from text: ints for integer axes, bytes for sizes, else as given."""
    text = text.strip()
    if axis in _SIZE_AXES:
        from simulator.hw import parse_size

        try:
            return parse_size(text)
        except InputError as err:
            raise InputError(f"axis {axis!r}: {err}") from None
    if axis in _INT_AXES:
        if len(text.lstrip("+-")) > limits.MAX_JSON_INT_DIGITS:
            raise InputError(f"axis {axis!r}: {limits.shown(text, 30)} is out of range "
                             f"(at most {limits.MAX_JSON_INT_DIGITS} digits)")
        try:
            return int(text)
        except ValueError:
            raise InputError(f"axis {axis!r}: {limits.shown(text)} is not an integer") from None
    return text


def _number(axis: str, text: str) -> float:
    value = _scalar(axis, text)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise InputError(f"axis {axis!r}: range end {limits.shown(text)} is not a "
                             "number") from None
    if not math.isfinite(value):
        raise InputError(f"axis {axis!r}: range end {limits.shown(text)} is not a finite "
                         "number")
    return value


def _range(axis: str, lo_text: str, hi_text: str, step_text: str | None) -> list[Any]:
    """The values of a range, counted before they are made: at most `limits.MAX_AXIS_VALUES`
    (a tiny step, a huge span or a step too small to move a large start is refused)."""
    lo, hi = _number(axis, lo_text), _number(axis, hi_text)
    geometric = bool(step_text) and step_text.startswith("x")
    shown = f"{lo_text}..{hi_text}{':' + step_text if step_text else ''}"
    try:
        step = float(step_text.lstrip("x")) if step_text else 1.0
    except ValueError:
        raise InputError(f"axis {axis!r}: bad range step {limits.shown(step_text)}") from None
    if not math.isfinite(step) or hi < lo or (geometric and (step <= 1 or lo <= 0)) \
            or (not geometric and step <= 0):
        raise InputError(f"axis {axis!r}: empty or endless range {limits.shown(shown)}")
    top = hi * (1 + 1e-12)
    if geometric:
        count = math.floor(math.log(top / lo) / math.log(step)) + 1 if step > 1 + 1e-15 \
            else math.inf
    else:
        count = math.floor((top - lo) / step) + 1
    if count > limits.MAX_AXIS_VALUES:
        raise InputError(f"axis {axis!r}: range {limits.shown(shown)} has "
                         f"{_count_text(count)} values; at most {limits.MAX_AXIS_VALUES:,} "
                         "per axis (docs/limits.md)")
    values, v = [], lo
    while v <= top:
        if len(values) == limits.MAX_AXIS_VALUES or (values and v == values[-1]):
            raise InputError(f"axis {axis!r}: range {limits.shown(shown)} has more than "
                             f"{limits.MAX_AXIS_VALUES:,} values or a step too small to "
                             "move it (docs/limits.md)")
        values.append(int(v) if float(v).is_integer() else v)
        v = v * step if geometric else v + step
    return values


def _count_text(count: float) -> str:
    return f"{count:,.0f}" if count < 1e18 else f"{count:.3g}" if math.isfinite(count) \
        else "endless"


def _check_value(axis: str, value: Any) -> Any:
    """`value` if it is a scalar an axis can hold (text or a finite number); a mapping, a
    boolean, null or NaN is refused, naming the axis."""
    if value is None:
        raise InputError(f"axis {axis!r}: null (an empty entry) is not a value")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        kind = {"dict": "a mapping", "bool": "a boolean"}.get(type(value).__name__,
                                                            type(value).__name__)
        raise InputError(f"axis {axis!r}: {limits.shown(value)} is {kind}, not a value "
                         "(a name, a number or a range)")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"axis {axis!r}: {value!r} is not a finite number")
    if isinstance(value, int) and abs(value) > 2**63 - 1:
        raise InputError(f"axis {axis!r}: {limits.shown(value, 30)} is out of range")
    return value


def parse_axis(axis: str, value: Any) -> list[Any]:
    """The values of `axis` given as a YAML value: a list, a scalar or a range string.

    Examples: ``"64KiB..2MiB:x2"`` -> 64 KiB, 128 KiB, ... 2 MiB in bytes; ``"0..4"`` ->
    0..4; ``"lbdf,brr"`` -> ``["lbdf", "brr"]``; ``[1, 2]`` -> ``[1, 2]``.

    Raises:
        InputError: a bad range or size, a value that is no scalar, an empty axis or one of
            more than `limits.MAX_AXIS_VALUES` values, quoting it.
    """
    values = _axis_values(axis, value)
    if not values:
        raise InputError(f"axis {axis!r} has no values")
    if len(values) > limits.MAX_AXIS_VALUES:
        raise InputError(f"axis {axis!r} has {len(values):,} values; at most "
                         f"{limits.MAX_AXIS_VALUES:,} per axis (docs/limits.md)")
    return values


def _axis_values(axis: str, value: Any) -> list[Any]:
    if axis == "input_shape":
        return _shapes(value)
    if isinstance(value, (list, tuple)):
        out: list[Any] = []
        for item in value:
            if isinstance(item, (list, tuple)):
                raise InputError(f"axis {axis!r}: a list inside a list "
                                 f"({limits.shown(item)}) is not a value")
            out += _axis_values(axis, item)
            if len(out) > limits.MAX_AXIS_VALUES:
                break
        return out
    value = _check_value(axis, value)
    if not isinstance(value, str):
        return [value]
    if axis == "objectives":  # "dram,mbu" is one value of this axis
        return [value.strip()]
    values: list[Any] = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        m = _RANGE.match(part)
        if m and axis not in ("model", "hw", "input_shape", "graph_stages"):
            values += _range(axis, m["lo"], m["hi"], m["step"])
        else:
            values.append(_scalar(axis, part))
        if len(values) > limits.MAX_AXIS_VALUES:
            break
    if not values:
        raise InputError(f"axis {axis!r}: no values in {limits.shown(value)}")
    return values


_DIM = re.compile(r"^(\d+|[A-Za-z_]\w*)$")


def _shapes(value: Any) -> list[Any]:
    """Values of the ``input_shape`` axis: one shape per list item (``"1,3,128,128"`` or
    ``[1, 3, 128, 128]``), or shapes separated by ``;`` in one string (the command line's
    ``--input-shape "1,3,128,128;1,3,256,256"``); a comma never separates two values here."""
    if value is None:
        return [None]
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return [",".join(str(v) for v in value)]
        return [v for item in value for v in _shapes(item)]
    if not isinstance(value, str) or isinstance(value, bool):
        raise InputError(f"axis 'input_shape': {limits.shown(value)} is not a shape such as "
                         "1,3,224,224")
    out: list[Any] = []
    for part in (p.strip() for p in value.split(";")):
        if not part:
            continue
        dims = [d.strip() for d in part.split(",")]
        if not all(_DIM.match(d) for d in dims):
            raise InputError(f"axis 'input_shape': {limits.shown(part)} is not a shape such as "
                             "1,3,224,224 "
                             "(dimensions separated by commas, shapes by ';' or list items)")
        out.append(",".join(dims))
    if not out:
        raise InputError(f"axis 'input_shape': no shape in {limits.shown(value)}")
    return out


def canonical_axis(name: str) -> str:
    """The axis `name` denotes (plural aliases accepted).

    Raises:
        InputError: unknown axis, with the closest known name.
    """
    key = _ALIASES.get(name, name)
    if key in AXES or key in hardware_axes():
        return key
    known = list(AXES) + list(hardware_axes()) + list(_ALIASES)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else f" (axes: {', '.join(AXES + HW_AXES)})"
    raise InputError(f"unknown axis {limits.shown(name)}{hint}")


# --- the spec -------------------------------------------------------------------------------


class SweepSpec(BaseModel):
    """A sweep as written in YAML: a name, axes, and include/exclude lists."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "sweep"
    axes: dict[str, Any]
    include: list[dict[str, Any]] = []
    exclude: list[dict[str, Any]] = []


def _parse_axes(raw: Any, where: str) -> dict[str, list[Any]]:
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: expected a mapping of axes to values, got "
                         f"{limits.shown(raw)}")
    axes: dict[str, list[Any]] = {}
    for name, value in raw.items():
        if not isinstance(name, str):
            raise InputError(f"{where}: axis name {limits.shown(name)} is not text")
        key = canonical_axis(name)
        if key in axes:
            raise InputError(f"{where}: axis {key!r} given twice")
        axes[key] = parse_axis(key, value)
    return axes


_NAME_FORBIDDEN = re.compile(r"[/\\]")


def check_name(name: Any, path_free: bool = True) -> str:
    """`name` if it can name a sweep: text of 1 to `limits.MAX_SWEEP_NAME_CHARS` printable
    characters; when the store's path is made from it (no ``--store``, `path_free`), also a
    plain file name: no ``/`` or ``\\``, not starting with a dot, so that the store stays in
    the sweeps folder.

    Raises:
        InputError: the name, shown escaped and cut.
    """
    if not isinstance(name, str):
        raise InputError(f"sweep name {limits.shown(name)} is not text")
    if not name.strip() or len(name) > limits.MAX_SWEEP_NAME_CHARS:
        raise InputError(f"sweep name {limits.shown(name)} must have 1 to "
                         f"{limits.MAX_SWEEP_NAME_CHARS} characters")
    if not name.isprintable():
        raise InputError(f"sweep name {limits.shown(name)} holds control characters")
    if path_free and (_NAME_FORBIDDEN.search(name) or name.startswith(".")):
        raise InputError(f"sweep name {limits.shown(name)} would place the store outside the "
                         "sweeps folder (a name has no '/', '\\' or leading '.'; give --store "
                         "PATH to choose where the store goes)")
    return name


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a YAML sweep spec (structure only; values by `validate_points`).

    The file is read within the limits of `simulator.limits` (at most
    ``MAX_FILE_BYTES["sweep spec"]``, a regular file, UTF-8) and parsed by
    `simulator.hw.load_yaml` (depth, aliases, duplicate keys, plain tags only).

    Raises:
        InputError: unreadable file, bad YAML, unknown top-level key, unknown axis, a value of
            the wrong type, a range or a sweep over the limits.
    """
    from simulator.hw import load_yaml

    origin = f"sweep spec {str(path)!r}"
    text = limits.read_text(path, "sweep spec", origin)
    doc = load_yaml(text, str(path), InputError, max_nodes=limits.MAX_SWEEP_POINTS)
    if not isinstance(doc, dict):
        raise InputError(f"{path}: a sweep spec is a mapping with 'axes'")
    doc.setdefault("name", Path(path).stem)
    try:
        spec = SweepSpec.model_validate(doc, strict=True)
    except ValidationError as err:
        e = err.errors()[0]
        loc = ".".join(str(p) for p in e["loc"])
        raise InputError(f"{path}: {limits.shown(loc, 80)[1:-1]}: {e['msg']}") from err
    expand(spec)  # unknown axes and bad ranges fail here, before anything runs
    return spec


def spec_from_flags(name: str, axes: Mapping[str, str | None]) -> SweepSpec:
    """A spec from command-line axes (None values are left out)."""
    return SweepSpec(name=name, axes={k: v for k, v in axes.items() if v is not None})


def _point(values: Mapping[str, Any]) -> Point:
    from simulator.scheme import Scheme

    v = {**_DEFAULTS, **values}
    hw = tuple(sorted((k, v[k]) for k in v if k not in AXES))
    scheme = str(v["scheme"]).strip().lower()
    searchable = scheme not in {s.value for s in Scheme if not s.searchable}
    run = ((str(v["search"]).lower(), str(v["repair"]).lower(), str(v["objectives"]),
            v["budget"], v["seed"]) if searchable else (None,) * 5)
    shape = None if v["input_shape"] is None else str(v["input_shape"])
    stages = _stages_value(v["graph_stages"])  # lbl too: one graph per comparison
    return Point(str(v["model"]), str(v["hw"]), scheme, *run, input_shape=shape, overrides=hw,
                 graph_stages=stages)


def _stages_value(value: Any) -> str:
    """A graph-stages axis value in canonical form (``fuse+fission``; ``none``), or the text
    as given when it names no stage (reported by `validate_points`)."""
    from search.substitution.stages import parse_stages

    text = str(value).strip().lower()
    try:
        return "+".join(parse_stages(text)) or "none"
    except InputError:
        return text


def _product(axes: Mapping[str, Sequence[Any]]) -> Iterable[dict[str, Any]]:
    names = list(axes)
    for combo in itertools.product(*(axes[n] for n in names)):
        yield dict(zip(names, combo, strict=True))


def _matches(values: Mapping[str, Any], entry: Mapping[str, Sequence[Any]]) -> bool:
    return all({**_DEFAULTS, **values}.get(k) in allowed for k, allowed in entry.items())


def count_points(spec: SweepSpec) -> int:
    """The number of points `spec` may have, computed from its axes without making them: the
    product of the axes' lengths plus each include entry's product (exclusions are not
    subtracted: an upper bound, exact without them).

    Raises:
        InputError: as `expand`, before any point is made.
    """
    axes, _, includes = _parsed(spec)
    return _count(axes) + sum(_count({**axes, **extra}) for extra in includes)


def _count(axes: Mapping[str, Sequence[Any]]) -> int:
    return math.prod(len(v) for v in axes.values())


def _parsed(spec: SweepSpec) -> tuple[dict[str, list[Any]], list[dict[str, list[Any]]],
                                      list[dict[str, list[Any]]]]:
    axes = _parse_axes(spec.axes, "axes")
    if "model" not in axes:
        raise InputError("a sweep needs a 'model' axis (models: [...] or --models)")
    excludes = [_parse_axes(e, f"exclude[{i}]") for i, e in enumerate(spec.exclude)]
    includes = [_parse_axes(e, f"include[{i}]") for i, e in enumerate(spec.include)]
    return axes, excludes, includes


def expand(spec: SweepSpec) -> list[Point]:
    """The points of `spec`, in product order, without duplicates.

    Raises:
        InputError: unknown axis, bad value syntax, a spec without models, an empty axis, a
            sweep of more than `limits.MAX_SWEEP_POINTS` points (counted before any is made,
            `count_points`) or one whose exclusions remove every point.
    """
    axes, excludes, includes = _parsed(spec)
    sizes = [_count(axes)] + [_count({**axes, **extra}) for extra in includes]
    if sum(sizes) > limits.MAX_SWEEP_POINTS:
        product = " x ".join(f"{len(v):,} {k}" for k, v in axes.items() if len(v) > 1)
        extra = f" plus {sum(sizes[1:]):,} included" if len(sizes) > 1 else ""
        raise InputError(f"the sweep has {sum(sizes):,} points ({product or '1'}{extra}); "
                         f"at most {limits.MAX_SWEEP_POINTS:,} are accepted (docs/limits.md)")
    points = [_point(v) for v in _product(axes)
              if not any(_matches(v, e) for e in excludes)]
    for extra in includes:
        points += [_point(v) for v in _product({**axes, **extra})]
    if not points:
        raise InputError("the sweep has no points: its exclude entries remove every one")
    return list(dict.fromkeys(points))


# --- validation -----------------------------------------------------------------------------


class SweepError(InputError):
    """Bad values in a sweep: `problems` holds one line per bad entry (the message joins them,
    since an `InputError` is one line)."""

    SHOWN = 5
    """Problems the message lists (all of them are in `problems`)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        count = f"{len(problems)} problems in the sweep: " if len(problems) > 1 else ""
        more = f"; and {len(problems) - self.SHOWN} more" if len(problems) > self.SHOWN else ""
        super().__init__(count + "; ".join(problems[:self.SHOWN]) + more)


def _model_problem(model: str) -> str | None:
    from simulator.workload.loader import resolve_zoo_name

    if any(len(part) > limits.MAX_NAME_CHARS for part in model.split("/")) \
            or not model.isprintable():
        return (f"model {limits.shown(model, 40)} is not a name (longer than "
                f"{limits.MAX_NAME_CHARS} characters, or holding control characters)")
    base = model.split("@", 1)[0]
    if resolve_zoo_name(base) is not None:
        return None
    path = Path(model)
    if path.suffix.lower() in (".onnx", ".json") or path.exists():
        return None if path.is_file() else f"model file {limits.shown(model)} does not exist"
    if ":" in model:
        module, _, attr = model.partition(":")
        import importlib.util

        try:
            found = importlib.util.find_spec(module) is not None
        except (Exception, SystemExit):  # noqa: BLE001 - a parent package that fails to import
            found = False
        return None if found and attr else (f"model {limits.shown(model)}: cannot find module "
                                            f"{limits.shown(module)}")
    from simulator.workload.zoo_catalog import catalog

    close = difflib.get_close_matches(base.lower(), list(catalog()), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else " (fusion-dse models lists the zoo)"
    return f"unknown model {limits.shown(model)}{hint}"


def _checks() -> dict[str, Any]:
    """Value checks per run axis: each raises InputError for a bad value."""
    from fusion_dse.runspec import check_budget, check_seed
    from search import PlanBudget
    from search.problem import parse_objectives
    from search.registry import REPAIRS, SEARCHES
    from simulator.scheme import Scheme

    def seed(value: Any) -> None:
        if not isinstance(value, int):  # a run takes numpy integers too; a spec's are plain
            raise InputError(f"seed must be a non-negative integer, got {limits.shown(value)}")
        check_seed(value)

    def budget(value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"budget must be a positive integer, got {limits.shown(value)}")
        PlanBudget(check_budget(value))

    def input_shape(value: Any) -> None:
        dims = str(value).split(",")
        numbers = tuple(int(d) for d in dims if d.isdigit())
        if len(dims) > 8 or any(d <= 0 for d in numbers):
            raise InputError(f"{limits.shown(value)}: at most 8 dimensions, each positive")
        if numbers:
            limits.check_input_size(numbers, str(value))

    from search.substitution.stages import parse_stages

    return {"scheme": Scheme.parse, "search": SEARCHES.get, "repair": REPAIRS.get,
            "objectives": parse_objectives, "budget": budget, "seed": seed,
            "graph_stages": parse_stages, "input_shape": input_shape}


def _support_problems(points: Sequence[Point]) -> list[str]:
    """Search and repair strategies asked for a dataflow they do not declare."""
    from search.registry import REPAIRS, SEARCHES

    problems = []
    for registry, axis in ((SEARCHES, "search"), (REPAIRS, "repair")):
        for name, scheme in dict.fromkeys((getattr(p, axis), p.scheme) for p in points):
            if name in registry and not registry.get(name).supports(scheme):
                problems.append(f"{registry.kind} {name!r} does not support scheme {scheme!r}")
    problems.extend(_objective_problems(points))
    return problems


def _objective_problems(points: Sequence[Point]) -> list[str]:
    """Objectives a searched scheme refuses (a hybrid minimises DRAM alone)."""
    from search.problem import problem_settings

    problems = []
    for scheme, objectives in dict.fromkeys((p.scheme, p.objectives) for p in points
                                            if p.search is not None):
        try:
            problem_settings(scheme, objectives)
        except InputError as err:
            problems.append(str(err))
    return problems


def validate_points(points: Sequence[Point]) -> None:
    """Check every value of every point before anything runs.

    Models are checked by name (zoo), file existence (ONNX, graph JSON) or module lookup
    (``module:callable``); hardware by loading each distinct preset with its overrides;
    search, repair, objectives, budget and seed by the library's own parsers, so any name
    the search registry accepts is accepted here.

    Raises:
        SweepError: every problem (each quoting the bad value), in `SweepError.problems`.
    """
    from simulator.hw import load_hw

    problems: list[str] = []
    for model in dict.fromkeys(p.model for p in points):
        if (problem := _model_problem(model)) is not None:
            problems.append(problem)
    for hw, overrides in dict.fromkeys((p.hw, p.overrides) for p in points):
        try:
            load_hw(hw, dict(overrides))
        except InputError as err:
            problems.append(str(err))
    for axis, check in _checks().items():
        for value in dict.fromkeys(getattr(p, axis) for p in points):
            if value is None:
                continue
            try:
                check(value)
            except InputError as err:
                problems.append(f"axis {axis!r}: {err}")
    if not problems:
        problems = _support_problems(points)
    if problems:
        raise SweepError(list(dict.fromkeys(problems)))

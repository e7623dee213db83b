"""Input limits: every bound the tool puts on what a user gives it, in one place.

The command line and the library check these at the edge, before any work, so that a tiny
hostile input (a billion-laughs YAML, ``/dev/zero`` as a plan, a 100,000-deep JSON document, a
1e54-byte buffer) ends in one line and exit status 2 instead of exhausting memory or time.
docs/limits.md lists them for users; this module holds the numbers and the readers that apply
them:

* sizes of the files read (`MAX_FILE_BYTES`) and the regular-file check (`read_text`);
* nesting depth of JSON and YAML documents, checked without recursion before parsing
  (`check_json_depth`; YAML events in `simulator.hw`), and YAML alias expansion
  (`MAX_YAML_NODES`);
* string lengths (`MAX_NAME_CHARS`: model, ``--hw`` and op names);
* input-shape elements (`MAX_INPUT_ELEMS`, `MAX_DIM`) before torch allocates anything;
* physically meaningful ranges of the hardware fields (`HW_RANGES`). Researchers who want an
  extreme on purpose pass ``--allow-extreme-hw`` (or set ``FUSION_DSE_ALLOW_EXTREME_HW=1``):
  the wide, numerically safe ranges (`HW_HARD_RANGES`) then apply instead, and those are never
  lifted, because beyond them the cost arithmetic overflows or loses all precision;
* the search budget (`MAX_BUDGET`);
* sweeps: values per axis (`MAX_AXIS_VALUES`), points per sweep (`MAX_SWEEP_POINTS`), seeds
  (`MAX_SEED`), worker processes (`max_workers`), sweep names (`MAX_SWEEP_NAME_CHARS`) and how
  long a locked store is waited for (`STORE_LOCK_WAIT_S`);
* tensors of an imported graph (`MAX_TENSOR_ELEMS`) and constants an importer computes
  (`MAX_FOLD_ELEMS`);
* JSON numbers (`MAX_JSON_INT_DIGITS`, finite floats only);
* what an error line shows of an input (`shown`, `MAX_ERROR_CHARS`, control characters
  escaped by `escape_controls`).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simulator.errors import InputError

__all__ = [
    "EXTREME_HW_ENV",
    "MAX_AXIS_VALUES",
    "MAX_ERROR_CHARS",
    "MAX_FOLD_ELEMS",
    "MAX_JSON_INT_DIGITS",
    "MAX_SEED",
    "MAX_SWEEP_NAME_CHARS",
    "MAX_SWEEP_POINTS",
    "MAX_TENSOR_ELEMS",
    "STORE_LOCK_WAIT_S",
    "escape_controls",
    "max_workers",
    "one_line",
    "shown",
    "HW_HARD_RANGES",
    "HW_RANGES",
    "MAX_BUDGET",
    "MAX_DIM",
    "MAX_FILE_BYTES",
    "MAX_INPUT_ELEMS",
    "MAX_JSON_DEPTH",
    "MAX_NAME_CHARS",
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
    "allow_extreme_hw",
    "check_input_size",
    "check_json_depth",
    "check_name",
    "extreme_hw_allowed",
    "load_json_file",
    "load_json_text",
    "read_bytes",
    "read_text",
]

KIB, MIB, GIB, TIB = 1024, 1024**2, 1024**3, 1024**4

MAX_FILE_BYTES = {
    "plan": 64 * MIB,
    "graph": 256 * MIB,
    "hardware config": 1 * MIB,
    "onnx": 4 * GIB,
    "sweep spec": 1 * MIB,
}
"""Largest file read, by kind (an ONNX file may hold large weights; the others are text)."""

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects in a plan or graph JSON document (graph docs: 5)."""
MAX_YAML_DEPTH = 32
"""Deepest nesting of mappings and sequences in a hardware YAML file (presets: 2)."""
MAX_YAML_NODES = 10_000
"""Most YAML nodes a hardware file may expand to, aliases counted every time they are used."""
MAX_NAME_CHARS = 255
"""Longest model spec, ``--hw`` name or path component accepted (a file name limit)."""
MAX_INPUT_ELEMS = 2**27
"""Most elements of a network input (134M, e.g. 1x3x6688x6688 or 2666 x 3x224x224)."""
MAX_DIM = 2**20
"""Largest single input dimension."""
MAX_BUDGET = 10**8
"""Largest search budget (plans proposed and evaluated); 10^8 plans take days."""
MAX_TENSOR_ELEMS = 2**31
"""Most elements of any tensor of an imported graph (16 x `MAX_INPUT_ELEMS`: the activations
of a network whose input is at the limit), checked after shape inference."""
MAX_FOLD_ELEMS = MAX_INPUT_ELEMS
"""Most elements of one constant an importer computes from the model's constants (ONNX
constant folding: ConstantOfShape, Range, Expand, ...), checked before it is computed."""
MAX_JSON_INT_DIGITS = 19
"""Longest integer in a JSON document (every count the tool keeps fits in 64 bits)."""
MAX_AXIS_VALUES = 10_000
"""Most values of one sweep axis (a range is counted before it is expanded)."""
MAX_SWEEP_POINTS = 100_000
"""Most points of one sweep: the product of its axes plus its include entries, counted before
any point is made (exclusions are not subtracted)."""
MAX_SEED = 2**63 - 1
"""Largest seed (a seed is stored in a 64-bit SQLite integer)."""
MAX_SWEEP_NAME_CHARS = 100
"""Longest sweep name."""
WORKERS_PER_CORE = 2
"""An embedded Dask cluster has at most this many worker processes per CPU core."""
MAX_CLUSTER_WORKERS = 10_000
"""Largest ``--workers`` given with ``--scheduler`` (it only scales ``--dry-run``'s estimate)."""
STORE_LOCK_WAIT_S = 10.0
"""Seconds a sweep waits for a store another writer has locked before it says so."""
MAX_ERROR_CHARS = 1_000
"""Longest error line (the rest is cut; a quoted input shows only its start, `shown`)."""

_HW_FIELD_RANGES: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    # field:            (physically meaningful), (numerically safe)
    "buffer":           ((16, 64 * GIB), (1, 2**50)),
    "weight_buffer":    ((16, 64 * GIB), (1, 2**50)),
    "activation_buffer": ((16, 64 * GIB), (1, 2**50)),
    "dram_bandwidth":   ((1e-3, 1e6), (1e-9, 1e12)),
    "buffer_bandwidth": ((1e-3, 1e7), (1e-9, 1e12)),
    "dram_latency":     ((0, 1e7), (0, 1e12)),
    "clock":            ((1e6, 1e11), (1e3, 1e13)),
    "macs_per_cycle":   ((1, 1e9), (1, 1e12)),
    "energy":           ((0, 1e6), (0, 1e12)),
    "sram.banks":       ((1, 65536), (1, 2**30)),
    "sram.word_bytes":  ((1, 1024), (1, 2**20)),
    "sram.leakage_pw_per_bit": ((0, 1e6), (0, 1e12)),
}

HW_RANGES: dict[str, tuple[float, float]] = {k: r for k, (r, _) in _HW_FIELD_RANGES.items()}
"""Physically meaningful range of each hardware field (bytes, B/cycle, cycles, Hz, MACs/cycle,
pJ per byte or per MAC), inclusive."""

HW_HARD_RANGES: dict[str, tuple[float, float]] = {k: r for k, (_, r) in
                                                  _HW_FIELD_RANGES.items()}
"""Ranges that hold even with ``--allow-extreme-hw``: beyond them the cost arithmetic
overflows (a 1e-320 B/cycle bandwidth) or a run never ends."""

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')

EXTREME_HW_ENV = "FUSION_DSE_ALLOW_EXTREME_HW"
_EXTREME_HW: contextvars.ContextVar[bool] = contextvars.ContextVar("extreme_hw", default=False)


def max_workers() -> int:
    """Most worker processes of an embedded Dask cluster: `WORKERS_PER_CORE` per CPU core."""
    return WORKERS_PER_CORE * (os.cpu_count() or 1)


def escape_controls(text: str) -> str:
    """`text` with every character Python does not print (control and format characters: ESC,
    NUL, bidirectional overrides, line separators, ...) written as its escape (``\\x1b``,
    ``\\u202e``), so that a name never drives the terminal or splits an error line."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in text)


def one_line(message: str, limit: int = MAX_ERROR_CHARS) -> str:
    """`message` as one error line: whitespace runs made one space, control characters
    escaped (`escape_controls`), cut to `limit` characters (``...`` marks the cut)."""
    text = escape_controls(" ".join(str(message).split()))
    return text if len(text) <= limit else text[:limit - 4] + " ..."


def shown(value: Any, limit: int = 60) -> str:
    """`value` quoted for an error line: its repr, cut to `limit` characters (``'abc...'``),
    control characters escaped."""
    text = value if isinstance(value, str) else repr(value)
    if isinstance(value, str):
        quoted = repr(text[:limit]) + ("..." if len(text) > limit else "")
    else:
        quoted = text[:limit] + ("..." if len(text) > limit else "")
    return escape_controls(quoted)


def extreme_hw_allowed() -> bool:
    """True inside `allow_extreme_hw` or when ``FUSION_DSE_ALLOW_EXTREME_HW`` is 1/true/yes."""
    env = os.environ.get(EXTREME_HW_ENV, "").strip().lower()
    return _EXTREME_HW.get() or env in ("1", "true", "yes")


@contextlib.contextmanager
def allow_extreme_hw(allowed: bool = True) -> Iterator[None]:
    """Within the block, hardware values outside `HW_RANGES` (but inside `HW_HARD_RANGES`)
    are accepted."""
    token = _EXTREME_HW.set(allowed)
    try:
        yield
    finally:
        _EXTREME_HW.reset(token)


def hw_range(field: str) -> tuple[float, float]:
    """The range `field` must lie in now (`HW_RANGES`, or `HW_HARD_RANGES` when allowed)."""
    return (HW_HARD_RANGES if extreme_hw_allowed() else HW_RANGES)[field]


def check_input_size(dims: tuple[int, ...], shown: str,
                     error: type[InputError] = InputError) -> tuple[int, ...]:
    """`dims` unless it has over 8 dimensions, one over `MAX_DIM` or more elements than
    `MAX_INPUT_ELEMS` (checked before torch allocates anything)."""
    if len(dims) > 8 or max(dims) > MAX_DIM:
        raise error(f"input shape {shown[:60]!r}: at most 8 dimensions of at most "
                    f"{MAX_DIM:,} each")
    elems = math.prod(dims)
    if elems > MAX_INPUT_ELEMS:
        raise error(f"input shape {shown[:60]!r} has {elems:,} elements; at most "
                    f"{MAX_INPUT_ELEMS:,} are accepted (docs/limits.md)")
    return dims


def check_name(text: str, what: str) -> str:
    """`text` unless it is longer than `MAX_NAME_CHARS` (the message shows only its start)."""
    if len(text) > MAX_NAME_CHARS:
        raise InputError(f"{what} {text[:40]!r}... is {len(text):,} characters long; at most "
                         f"{MAX_NAME_CHARS} are accepted")
    return text


def read_bytes(path: str | os.PathLike[str], kind: str, where: str,
               error: type[InputError] = InputError) -> bytes:
    """The bytes of a regular file of at most ``MAX_FILE_BYTES[kind]`` bytes.

    Refuses, with one line, a missing file, a directory, a device or pipe (``/dev/zero``), a
    file over the limit (it is never read past the limit) and a name over `MAX_NAME_CHARS`
    per component.
    """
    limit = MAX_FILE_BYTES[kind]
    text = os.fspath(path)
    if any(len(part) > MAX_NAME_CHARS for part in Path(text).parts):
        raise error(f"{where}: a path component is longer than {MAX_NAME_CHARS} characters")
    try:
        st = os.stat(text)
        if not stat.S_ISREG(st.st_mode):
            kind_text = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise error(f"{where} is {kind_text}")
        if st.st_size > limit:
            raise error(f"{where} is {st.st_size:,} bytes; at most {limit:,} are read")
        with open(text, "rb") as f:
            data = f.read(limit + 1)
    except OSError as err:
        raise error(f"cannot read {where}: {err.strerror or err}") from err
    if len(data) > limit:
        raise error(f"{where} is over {limit:,} bytes")
    return data


def read_text(path: str | os.PathLike[str], kind: str, where: str,
              error: type[InputError] = InputError) -> str:
    """`read_bytes` decoded as UTF-8; other encodings are one line, not a traceback."""
    data = read_bytes(path, kind, where, error)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{where} is not UTF-8 text (byte {err.start}: "
                    f"0x{data[err.start]:02x})") from err


def check_json_depth(text: str, where: str, limit: int = MAX_JSON_DEPTH,
                     error: type[InputError] = InputError) -> None:
    """Refuse a JSON text nested deeper than `limit`, scanning it once without recursion
    (the json module recurses per level and would raise RecursionError)."""
    depth = 0
    for token in _JSON_TOKEN.finditer(text):
        ch = token.group()
        if ch in "[{":
            depth += 1
            if depth > limit:
                raise error(f"{where} is nested more than {limit} levels deep")
        elif ch in "]}":
            depth -= 1


def load_json_file(path: str | os.PathLike[str], kind: str, where: str,
                   error: type[InputError] = InputError) -> Any:
    """A JSON document read with `read_text` and `check_json_depth`; NaN and Infinity are
    refused (they are not JSON), and so are numbers out of range (`load_json_text`)."""
    return load_json_text(read_text(path, kind, where, error), where, error)


def load_json_text(text: str, where: str, error: type[InputError] = InputError) -> Any:
    """A JSON document from `text`, checked for depth first (`check_json_depth`); refuses
    ``NaN`` and ``Infinity``, a number that overflows a float (``1e400``) and an integer of
    more than `MAX_JSON_INT_DIGITS` digits (Python would refuse 4,300 digits with a
    ValueError, and no count the tool keeps needs more than 64 bits)."""
    check_json_depth(text, where, error=error)

    def no_constant(name: str) -> Any:
        raise error(f"{where}: {name} is not a JSON number")

    def finite(number: str) -> float:
        value = float(number)
        if not math.isfinite(value):
            raise error(f"{where}: the number {shown(number, 30)} is out of range")
        return value

    def bounded(number: str) -> int:
        if len(number.lstrip("-")) > MAX_JSON_INT_DIGITS:
            raise error(f"{where}: an integer of {len(number.lstrip('-')):,} digits is out of "
                        f"range (at most {MAX_JSON_INT_DIGITS})")
        return int(number)

    try:
        return json.loads(text, parse_constant=no_constant, parse_float=finite,
                          parse_int=bounded)
    except json.JSONDecodeError as err:
        raise error(f"{where} is not valid JSON: {err}") from err
    except RecursionError as err:
        raise error(f"{where} is nested too deeply") from err

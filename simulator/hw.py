"""Hardware configurations: the immutable `HardwareConfig` and its validated YAML loader.

A hardware description is a YAML mapping with these keys (units fixed, so sweeps compare):

=====================  ========  ==========================================================
key                    required  meaning
=====================  ========  ==========================================================
``name``               no        identifier (defaults to the file name without ``.yaml``)
``description``        no        free text
``source``             no        citation of the figures
``buffer``             yes       on-chip buffer capacity: bytes or a size string, ``256KiB``;
                                 with split buffers the total (optional, must equal the sum)
``weight_buffer``      no        a separate weight buffer's capacity (a size); given with
``activation_buffer``  no        ``activation_buffer``, the buffer is split: weights are held
                                 in one, activations in the other (absent: one shared buffer)
``dtype_bytes``        no        bytes per tensor element: 1, 2, 4 or 8 (default 1, int8)
``dram_bandwidth``     yes       off-chip bytes per cycle (> 0)
``dram_latency``       yes       cycles before a DRAM access/burst starts delivering (>= 0)
``clock``              yes       Hz: ``1e9``, ``700e6``, ``1GHz``, ``700MHz``, ``200 MHz``
``macs_per_cycle``     yes       PE-array throughput (> 0)
``buffer_bandwidth``   yes       on-chip buffer bytes per cycle (> 0)
``energy``             yes       mapping of ``dram_pj_per_byte``, ``mac_pj`` and optionally
                                 ``buffer_pj_per_byte`` (each >= 0, so a term can be switched
                                 off); without ``buffer_pj_per_byte`` the buffer's access
                                 energy is the SRAM model's at its capacity (``sram``)
``sram``               no        how the buffers are built: ``node_nm`` (90, 65, 45, 32, 28,
                                 22; default 45), ``banks`` (1), ``word_bytes`` (8),
                                 ``array_efficiency`` (0.7), ``leakage_pw_per_bit`` (the
                                 node's), ``table`` (a CSV file or a list of rows replacing
                                 the model), ``source``: `simulator.sram`, docs/hardware.md
``lbdf_buffer``        no        LBDF line-buffer granularity: ``pixel`` (default, the
                                 paper's Fig. 1 line buffer: (k-1) rows + k pixels per k x k
                                 window) or ``row`` (whole rows); docs/cost-model.md 4.1
=====================  ========  ==========================================================

Unknown keys are rejected (with a suggestion), and every error is one line naming the file,
the key and the offending value. Overrides (``load_hw(spec, {"buffer": "128KiB"})`` or
`HardwareConfig.with_overrides`) use the same key names, or the `HardwareConfig` field names
(``buffer_bytes=131072``), or ``energy.mac_pj`` / ``sram.node_nm`` for one figure of a section;
they are validated the same way and errors name the override.

Split buffers: ``weight_buffer`` and ``activation_buffer`` come together; ``buffer`` then
follows as their sum (a file may state it; it must agree). An override of either split
capacity replaces the file's ``buffer`` (the total follows again); an override of ``buffer``
alone on a split configuration scales both buffers in proportion (the weight buffer rounded
down), as an NVDLA-style partition keeps its share of a larger or smaller CBUF.
`HardwareConfig.buffers` lists the buffers by role; `HardwareConfig.fits` is the capacity
rule every dataflow applies.

Presets are the YAML files of the repository's top-level ``hwconfigs/`` folder (the one users
edit and copy from). That folder is also the data package ``hwconfigs``, installed with the
distribution, so `load_hw` finds the presets through `importlib.resources` in a source
checkout, an editable install and a wheel alike.

The pydantic schema is the one validator: `load_hw` and `HardwareConfig.with_overrides` build
every `HardwareConfig` through it; the dataclass itself only holds the validated values.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.resources
import math
import os
import re
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from importlib.resources.abc import Traversable
from pathlib import Path, PurePath
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError

from simulator import limits, sram
from simulator.errors import InputError
from simulator.sram import SramCost, SramSpec

__all__ = [
    "DEFAULT_PRESET",
    "LBDF_BUFFERS",
    "PRESET_PACKAGE",
    "HardwareConfig",
    "HardwareConfigError",
    "list_presets",
    "override_keys",
    "BUFFER_ROLES",
    "format_size",
    "load_hw",
    "load_yaml",
    "parse_size",
    "preset_dir",
]

PRESET_PACKAGE = "hwconfigs"
DEFAULT_PRESET = "edge-npu"

_NUMBER_UNIT = re.compile(
    r"\s*(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>[A-Za-z]*)\s*"
)
_SIZE_UNIT = re.compile(r"(?:(?P<prefix>[kKmMgG])[iI]?)?B")
_SIZE_PREFIX_POWER = {"k": 1, "m": 2, "g": 3}
_CLOCK_UNITS = {"": 1.0, "hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}
_DTYPE_BYTES = (1, 2, 4, 8)
LBDF_BUFFERS = ("pixel", "row")
BUFFER_ROLES = ("shared", "weights", "activations")
"""The roles of the on-chip buffers `HardwareConfig.buffers` names."""
_SPLIT_KEYS = ("weight_buffer", "activation_buffer")
"""LBDF line-buffer granularities (`HardwareConfig.lbdf_buffer`); the first is the default."""
_MIN_CLOCK_HZ = 1e3
_T = TypeVar("_T")


class HardwareConfigError(InputError):
    """A hardware description (file, preset name, override or size) that is not valid."""


# --- value checks: each returns the normalised value or raises ValueError(reason) -----------


def _real(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValueError("must be finite")
    return number


def _whole(value: Any) -> int:
    number = _real(value)
    if not number.is_integer():
        raise ValueError("must be a whole number")
    return value if isinstance(value, int) else int(number)


def _signed(convert: Callable[[Any], Any], zero_ok: bool) -> Callable[[Any], Any]:
    """A validator: `convert`, then refuse values <= 0 ("must be positive") or, with
    `zero_ok`, < 0 ("must not be negative")."""
    def check(value: Any) -> Any:
        number = convert(value)
        if number < 0 or (number == 0 and not zero_ok):
            raise ValueError("must not be negative" if zero_ok else "must be positive")
        return number
    return check


_positive = _signed(_real, zero_ok=False)
_non_negative = _signed(_real, zero_ok=True)
_positive_int = _signed(_whole, zero_ok=False)
_non_negative_int = _signed(_whole, zero_ok=True)


def _dtype_bytes(value: Any) -> int:
    number = _positive_int(value)
    if number not in _DTYPE_BYTES:
        raise ValueError("must be 1, 2, 4 or 8 (bytes per element, not bits)")
    return number


def _lbdf_buffer(value: Any) -> str:
    if not isinstance(value, str) or value.strip().lower() not in LBDF_BUFFERS:
        raise ValueError("must be 'pixel' (the paper's pixel line buffer, the default) or "
                         "'row' (whole rows)")
    return value.strip().lower()


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string (quote it)")
    return value


def _name(value: Any) -> str:
    if not _text(value).strip():
        raise ValueError("must not be empty")
    if len(value) > limits.MAX_NAME_CHARS:
        raise ValueError(f"is longer than {limits.MAX_NAME_CHARS} characters")
    return value


def _clock_number(value: Any) -> float:
    hz = _positive(value)
    if hz < _MIN_CLOCK_HZ:
        raise ValueError(f"{hz:g} Hz is implausibly low: the clock is in Hz (e.g. '{hz:g}MHz')")
    return hz


def _quantity(value: Any, number: Callable[[Any], _T], text: Callable[[str, str], _T],
              what: str) -> _T:
    """`number(value)` for a number, `text(NUMBER, UNIT)` for a string of a number and an
    optional unit; any other string is "not a `what`"."""
    if not isinstance(value, str):
        return number(value)
    match = _NUMBER_UNIT.fullmatch(value)
    if match is None:
        raise ValueError(f"not a {what}")
    return text(match["num"], match["unit"])


def _clock(value: Any) -> float:
    """Clock in Hz from a number or a string with an optional Hz/kHz/MHz/GHz unit."""
    return _quantity(value, _clock_number, _clock_text,
                     "frequency (use e.g. 1e9, '1GHz' or '700MHz')")


def _clock_text(num: str, unit: str) -> float:
    scale = _CLOCK_UNITS.get(unit.lower())
    if scale is None:
        raise ValueError(f"unknown clock unit {unit!r} (use Hz, kHz, MHz, GHz)")
    return _clock_number(float(num) * scale)


def _size_multiplier(unit: str) -> int:
    if unit == "":
        return 1
    match = _SIZE_UNIT.fullmatch(unit)
    if match is None:
        bits = " ('b' means bits; sizes are in bytes)" if unit.endswith("b") else ""
        raise ValueError(f"unknown size unit {unit!r}{bits} (use B, KiB, MiB, GiB)")
    prefix = match["prefix"]
    return 1024 ** _SIZE_PREFIX_POWER[prefix.lower()] if prefix else 1


def _size(value: Any) -> int:
    """Bytes from an int, a whole float or a size string; see `parse_size`."""
    return _quantity(value, _positive_int, _size_text,
                     "size (use e.g. 262144, '256KiB' or '2MiB')")


def _size_text(num: str, unit: str) -> int:
    exact = Decimal(num) * _size_multiplier(unit)
    if exact <= 0:
        raise ValueError("must be positive")
    if exact != exact.to_integral_value():
        raise ValueError(f"is not a whole number of bytes ({exact.normalize():f} B)")
    return int(exact)


def _in_range(check: Callable[[Any], Any], field: str) -> Callable[[Any], Any]:
    """`check`, then the range of `field` in `simulator.limits` (physically meaningful, or
    numerically safe with ``--allow-extreme-hw``)."""

    def validate(value: Any) -> Any:
        number = check(value)
        low, high = limits.hw_range(field)
        if not low <= number <= high:
            hint = ("" if limits.extreme_hw_allowed()
                    else "; --allow-extreme-hw accepts extremes, see docs/limits.md")
            raise ValueError(f"outside the range {low:g}..{high:g}{hint}")
        return number

    return validate


def _yaml_number(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`check`, also accepting unit-less numeric strings: YAML 1.1 reads ``1e9`` as text."""

    def validate(value: Any) -> Any:
        match = _NUMBER_UNIT.fullmatch(value) if isinstance(value, str) else None
        if match is not None and not match["unit"]:
            value = float(match["num"])
        return check(value)

    return validate


def parse_size(value: int | float | str) -> int:
    """Bytes denoted by `value`.

    Accepts an int (``131072``), a whole float, or a string of a number and an optional unit:
    ``B``, ``KiB``, ``MiB``, ``GiB``. ``KB``/``kB``, ``MB`` and ``GB`` are read as binary
    (1024-based, the JEDEC convention for memories), because architects writing "128 KB" of
    SRAM mean 131072 bytes. Fractions are allowed when the result is whole (``1.5MiB``).
    A lower-case ``b`` (bits) is rejected.

    Args:
        value: The size to parse.

    Returns:
        The size in bytes, a positive int.

    Raises:
        HardwareConfigError: For zero, negative or fractional byte counts, unknown units or a
            value that is not a size; the message quotes `value`.
    """
    try:
        return _size(value)
    except ValueError as err:
        raise HardwareConfigError(f"size {value!r}: {err}") from err


def format_size(size: float) -> str:
    """A buffer size as people write it, the inverse of `parse_size` for labels:
    ``65536 -> "64 KiB"``, ``2097152 -> "2 MiB"``, ``1536 -> "1.5 KiB"``."""
    return f"{size / 2**20:g} MiB" if size >= 2**20 else f"{size / 1024:g} KiB"


# --- the value ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareConfig:
    """One accelerator's parameters: immutable and hashable (cost-model caches key on it).

    Build it with `load_hw` or `with_overrides`, which validate through the schema (the one
    validator); the constructor stores its arguments as given.

    Attributes:
        name: Identifier shown in reports.
        buffer_bytes: On-chip buffer capacity in bytes; with split buffers, their total.
        dtype_bytes: Bytes per tensor element (1 for int8).
        dram_bandwidth: Off-chip bandwidth in bytes per cycle.
        dram_latency: Cycles before a DRAM access or burst starts delivering data.
        clock_hz: Clock frequency in Hz.
        macs_per_cycle: Multiply-accumulates the PE array completes per cycle.
        buffer_bandwidth: On-chip buffer bandwidth in bytes per cycle.
        energy_dram_pj_per_byte: DRAM access energy in pJ per byte.
        energy_buffer_pj_per_byte: On-chip buffer access energy in pJ per byte: the YAML's
            ``energy.buffer_pj_per_byte``, or the SRAM model's at the buffer's capacity
            (`buffer_pj_from_sram`; with split buffers their capacity-weighted mean, reported;
            the energy charges each buffer's accesses at its own: `buffer_energy_pj`).
        energy_mac_pj: Energy of one multiply-accumulate in pJ.
        lbdf_buffer: LBDF line-buffer granularity: ``"pixel"`` (the paper's Fig. 1 line
            buffer, the default) or ``"row"`` (whole rows); see docs/cost-model.md 4.1.
        description: Free text.
        source: Citation of the figures.
        weight_buffer_bytes: The weight buffer's capacity when the buffer is split (None:
            one shared buffer).
        activation_buffer_bytes: The activation buffer's capacity when split (None: shared).
        sram: How the buffers are built (`simulator.sram`): their area, leakage and, unless
            the YAML gives ``energy.buffer_pj_per_byte``, their access energy. None (a
            config built by hand): no area and no leakage.
        buffer_pj_from_sram: `energy_buffer_pj_per_byte` is the SRAM model's (the YAML left
            ``energy.buffer_pj_per_byte`` out), so it follows the buffer's capacity.
    """

    name: str
    buffer_bytes: int
    dtype_bytes: int = 1
    dram_bandwidth: float
    dram_latency: int
    clock_hz: float
    macs_per_cycle: int
    buffer_bandwidth: float
    energy_dram_pj_per_byte: float
    energy_buffer_pj_per_byte: float
    energy_mac_pj: float
    lbdf_buffer: str = LBDF_BUFFERS[0]
    description: str = ""
    source: str = ""
    weight_buffer_bytes: int | None = None
    activation_buffer_bytes: int | None = None
    sram: SramSpec | None = None
    buffer_pj_from_sram: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.sram, Mapping):  # the dict of `to_dict`, read back
            object.__setattr__(self, "sram", SramSpec.from_dict(self.sram))

    @property
    def memories(self) -> tuple[tuple[str, SramCost], ...]:
        """Each on-chip buffer (`buffers`) with what it costs (`simulator.sram.sram_cost`);
        empty without an SRAM description."""
        if self.sram is None:
            return ()
        return tuple((role, sram.sram_cost(size, self.sram)) for role, size in self.buffers)

    @property
    def area_mm2(self) -> float:
        """Silicon area of the on-chip buffers (0 without an SRAM description)."""
        return sum(cost.area_mm2 for _, cost in self.memories)

    @property
    def leakage_mw(self) -> float:
        """Leakage power of the on-chip buffers in mW."""
        return sum(cost.leakage_mw for _, cost in self.memories)

    @property
    def leakage_pj_per_cycle(self) -> float:
        """Leakage energy of the on-chip buffers per clock cycle (pJ): power / clock."""
        return self.leakage_mw * 1e9 / self.clock_hz

    @property
    def is_split(self) -> bool:
        """True when weights and activations have buffers of their own."""
        return self.weight_buffer_bytes is not None

    @property
    def buffers(self) -> tuple[tuple[str, int], ...]:
        """The on-chip buffers as (role, capacity in bytes): ``(("shared", buffer_bytes),)``,
        or ``(("weights", W), ("activations", A))`` when split."""
        if self.weight_buffer_bytes is None or self.activation_buffer_bytes is None:
            return (("shared", self.buffer_bytes),)
        return (("weights", self.weight_buffer_bytes),
                ("activations", self.activation_buffer_bytes))

    def buffer_energy_pj(self, traffic_bytes: float, weight_bytes: float | None = None) -> float:
        """Energy of `traffic_bytes` of on-chip buffer accesses, `weight_bytes` of them weights:
        at `energy_buffer_pj_per_byte`, or, for split buffers priced by the SRAM model, the
        weights at the weight buffer's pJ/B and the rest at the activation buffer's (each at its
        own capacity). Without `weight_bytes` the capacity-weighted mean prices them all."""
        if weight_bytes is None or not (self.is_split and self.buffer_pj_from_sram
                                        and self.sram is not None):
            return traffic_bytes * self.energy_buffer_pj_per_byte
        pj = {role: cost.pj_per_byte for role, cost in self.memories}
        return weight_bytes * pj["weights"] + (traffic_bytes - weight_bytes) * pj["activations"]

    @property
    def weight_capacity(self) -> int:
        """Bytes weights may occupy: the weight buffer's, or the shared buffer's."""
        return self.buffer_bytes if self.weight_buffer_bytes is None else self.weight_buffer_bytes

    @property
    def activation_capacity(self) -> int:
        """Bytes activations may occupy: the activation buffer's, or the shared buffer's."""
        return (self.buffer_bytes if self.activation_buffer_bytes is None
                else self.activation_buffer_bytes)

    def fits(self, weight_bytes: float, activation_bytes: float) -> bool:
        """Whether `weight_bytes` of weights and `activation_bytes` of activations held at
        once fit: their sum in a shared buffer, each in its own when split."""
        if self.weight_buffer_bytes is None or self.activation_buffer_bytes is None:
            return weight_bytes + activation_bytes <= self.buffer_bytes
        return (weight_bytes <= self.weight_buffer_bytes
                and activation_bytes <= self.activation_buffer_bytes)

    def with_overrides(self, **fields: Any) -> HardwareConfig:
        """A validated copy with some parameters replaced.

        Args:
            **fields: YAML key names (``buffer="128KiB"``, ``clock="1GHz"``,
                ``energy={"mac_pj": 0.1}``) or field names (``buffer_bytes=131072``). A value
                of None keeps the current one.

        Returns:
            The new configuration.

        Raises:
            HardwareConfigError: Naming the override, its value and what is wrong.
        """
        doc, labels = _merge(_to_doc(self), fields, origin=None)
        return _validate(doc, origin=None, labels=labels)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (sizes as ints, rates as floats); the split
        capacities only when split, so a shared buffer's dict (and every key hashed from it)
        is what it was before split buffers existed."""
        doc = dataclasses.asdict(self)
        if not self.is_split:
            del doc["weight_buffer_bytes"], doc["activation_buffer_bytes"]
        if doc.get("sram") is not None:  # the table's rows as a list, as JSON reads them back
            doc["sram"]["table"] = list(doc["sram"]["table"])
        return doc


# --- the YAML schema ------------------------------------------------------------------------

_Name = Annotated[str, PlainValidator(_name)]
_Text = Annotated[str, PlainValidator(_text)]
_Size = Annotated[int, PlainValidator(_in_range(_size, "buffer"))]
_WeightSize = Annotated[int | None, PlainValidator(_in_range(_size, "weight_buffer"))]
_ActivationSize = Annotated[int | None, PlainValidator(_in_range(_size, "activation_buffer"))]
_Clock = Annotated[float, PlainValidator(_in_range(_clock, "clock"))]
_DtypeBytes = Annotated[int, PlainValidator(_yaml_number(_dtype_bytes))]
_Macs = Annotated[int, PlainValidator(_in_range(_yaml_number(_positive_int), "macs_per_cycle"))]
_Latency = Annotated[int, PlainValidator(_in_range(_yaml_number(_non_negative_int),
                                                   "dram_latency"))]
_DramBandwidth = Annotated[float, PlainValidator(_in_range(_yaml_number(_positive),
                                                           "dram_bandwidth"))]
_BufferBandwidth = Annotated[float, PlainValidator(_in_range(_yaml_number(_positive),
                                                             "buffer_bandwidth"))]
_Energy = Annotated[float, PlainValidator(_in_range(_yaml_number(_non_negative), "energy"))]
_LbdfBuffer = Annotated[str, PlainValidator(_lbdf_buffer)]


def _sram_or_energy(value: Any) -> float | None:
    """None for ``sram`` (the SRAM model's figure: how an override asks for it), else an
    energy."""
    if isinstance(value, str) and value.strip().lower() == "sram":
        return None
    return _in_range(_yaml_number(_non_negative), "energy")(value)


_OptionalEnergy = Annotated[float | None, PlainValidator(_sram_or_energy)]


def _node(value: Any) -> int:
    number = _whole(_yaml_number(_real)(value))
    if number not in sram.NODES:
        raise ValueError(f"must be one of {', '.join(map(str, sram.NODES))} (nm), or give "
                         "an SRAM table (sram.table)")
    return number


def _efficiency(value: Any) -> float:
    number = _yaml_number(_positive)(value)
    if number > 1:
        raise ValueError("must be in (0, 1]: the bitcells' share of a macro's area")
    return number


def _table_size(value: Any) -> int:
    return _size(value)


def _sram_table(value: Any) -> tuple[sram.SramRow, ...]:
    """Rows from a list of mappings, or from the CSV or YAML file a string names."""
    if isinstance(value, tuple) and all(isinstance(r, sram.SramRow) for r in value):
        return value
    if isinstance(value, str):
        return _table_file(value)
    if isinstance(value, list | tuple) and not value:
        return ()  # no table: the model (as `to_dict` writes a config without one)
    if not isinstance(value, list | tuple):
        raise ValueError("must be a CSV or YAML file name or a list of rows with "
                         f"{', '.join(sram.TABLE_COLUMNS)}")
    return sram.parse_table(value, "row list", _table_size)


def _table_file(name: str) -> tuple[sram.SramRow, ...]:
    """The rows of the CSV (or YAML list) file `name` (relative to the working directory, or
    as `load_hw` resolved it against the hardware file's folder)."""
    where = f"file {limits.shown(name)}"
    path = Path(name).expanduser()
    try:
        text = limits.read_text(path, "hardware config", where, HardwareConfigError)
        if path.suffix.lower() in (".yaml", ".yml"):
            rows = load_yaml(text, where)
            if not isinstance(rows, list):
                raise ValueError(f"{where} must hold a list of rows")
            return sram.parse_table(rows, where, _table_size)
    except InputError as err:
        raise ValueError(str(err)) from None
    return sram.parse_table(text, where, _table_size)


def _optional(check: Callable[[Any], _T]) -> Callable[[Any], _T | None]:
    """`check`, letting None (the default: the node's figure) through."""
    return lambda value: None if value is None else check(value)


_Node = Annotated[int, PlainValidator(_node)]
_Banks = Annotated[int, PlainValidator(_in_range(_yaml_number(_positive_int), "sram.banks"))]
_WordBytes = Annotated[int, PlainValidator(_in_range(_yaml_number(_positive_int),
                                                     "sram.word_bytes"))]
_Efficiency = Annotated[float, PlainValidator(_efficiency)]
_Leakage = Annotated[float | None, PlainValidator(_optional(_in_range(
    _yaml_number(_non_negative), "sram.leakage_pw_per_bit")))]
_SramTable = Annotated[tuple[sram.SramRow, ...], PlainValidator(_sram_table)]


class _EnergySchema(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    dram_pj_per_byte: _Energy
    buffer_pj_per_byte: _OptionalEnergy = None
    mac_pj: _Energy


class _SramSchema(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    node_nm: _Node = sram.DEFAULT_NODE_NM
    banks: _Banks = 1
    word_bytes: _WordBytes = sram.HOROWITZ_WORD_BYTES
    array_efficiency: _Efficiency = sram.DEFAULT_ARRAY_EFFICIENCY
    leakage_pw_per_bit: _Leakage = None
    table: _SramTable = ()
    table_source: _Text = ""
    source: _Text = ""


class _HwSchema(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: _Name
    description: _Text = ""
    source: _Text = ""
    buffer: _Size
    dtype_bytes: _DtypeBytes = 1
    dram_bandwidth: _DramBandwidth
    dram_latency: _Latency
    clock: _Clock
    macs_per_cycle: _Macs
    buffer_bandwidth: _BufferBandwidth
    energy: _EnergySchema
    sram: _SramSchema = _SramSchema()
    lbdf_buffer: _LbdfBuffer = LBDF_BUFFERS[0]
    weight_buffer: _WeightSize = None
    activation_buffer: _ActivationSize = None


_TOP_KEYS = tuple(_HwSchema.model_fields)
_ENERGY_KEYS = tuple(_EnergySchema.model_fields)
_SRAM_KEYS = tuple(_SramSchema.model_fields)
_SECTIONS: dict[str, tuple[str, ...]] = {"energy": _ENERGY_KEYS, "sram": _SRAM_KEYS}
# HardwareConfig field -> YAML key path; also the accepted override spellings.
_FIELD_PATHS: dict[str, tuple[str, ...]] = {
    "buffer_bytes": ("buffer",),
    "weight_buffer_bytes": ("weight_buffer",),
    "activation_buffer_bytes": ("activation_buffer",),
    "clock_hz": ("clock",),
    **{f"energy_{key}": ("energy", key) for key in _ENERGY_KEYS},
    **{key: (key,) for key in _TOP_KEYS},
    **{f"energy.{key}": ("energy", key) for key in _ENERGY_KEYS},
    **{f"sram.{key}": ("sram", key) for key in _SRAM_KEYS},
    "buffer_pj_from_sram": ("energy", "buffer_pj_per_byte"),  # True: the SRAM model's
}


def override_keys() -> tuple[str, ...]:
    """The hardware fields an override (and a sweep axis) may set, one spelling each: the
    YAML keys, ``energy.X`` and ``sram.X`` (texts and whole sections left out)."""
    texts = {"name", "description", "source", "energy", "sram", "sram.source",
             "sram.table_source"}
    keys = [k for k in _TOP_KEYS if k not in texts]
    keys += [f"{section}.{k}" for section, sub in _SECTIONS.items() for k in sub]
    return tuple(k for k in keys if k not in texts)


def _to_doc(config: HardwareConfig) -> dict[str, Any]:
    """`config` in the YAML key layout, the starting point of `with_overrides` (a split
    configuration by its two capacities, the total following from them)."""
    split = {"weight_buffer": config.weight_buffer_bytes,
             "activation_buffer": config.activation_buffer_bytes} if config.is_split else {
             "buffer": config.buffer_bytes}
    return {
        "name": config.name,
        "description": config.description,
        "source": config.source,
        **split,
        "dtype_bytes": config.dtype_bytes,
        "dram_bandwidth": config.dram_bandwidth,
        "dram_latency": config.dram_latency,
        "clock": config.clock_hz,
        "macs_per_cycle": config.macs_per_cycle,
        "buffer_bandwidth": config.buffer_bandwidth,
        "energy": {key: getattr(config, f"energy_{key}") for key in _ENERGY_KEYS
                   if not (key == "buffer_pj_per_byte" and config.buffer_pj_from_sram)},
        **({"sram": _sram_doc(config.sram)} if config.sram is not None else {}),
        "lbdf_buffer": config.lbdf_buffer,
    }


def _sram_doc(spec: SramSpec) -> dict[str, Any]:
    """`spec` as the ``sram`` section, its table as rows (read again without the file)."""
    doc = spec.to_dict()
    if spec.table:
        doc["table"] = spec.table
    return doc


def _sram_spec(schema: _SramSchema) -> SramSpec:
    return SramSpec(node_nm=schema.node_nm, banks=schema.banks, word_bytes=schema.word_bytes,
                    array_efficiency=schema.array_efficiency,
                    leakage_pw_per_bit=schema.leakage_pw_per_bit, table=schema.table,
                    table_source=schema.table_source, source=schema.source)


def _buffer_pj(schema: _HwSchema, spec: SramSpec) -> float:
    """The buffer's pJ per byte: the YAML's, or the SRAM model's at each buffer's capacity
    (split buffers: weighted by capacity)."""
    if schema.energy.buffer_pj_per_byte is not None:
        return schema.energy.buffer_pj_per_byte
    sizes = ([schema.buffer] if schema.weight_buffer is None or schema.activation_buffer is None
             else [schema.weight_buffer, schema.activation_buffer])
    return sum(sram.sram_cost(n, spec).pj_per_byte * n for n in sizes) / sum(sizes)


def _from_schema(schema: _HwSchema) -> HardwareConfig:
    spec = _sram_spec(schema.sram)
    return HardwareConfig(
        name=schema.name,
        buffer_bytes=schema.buffer,
        dram_bandwidth=schema.dram_bandwidth,
        dram_latency=schema.dram_latency,
        clock_hz=schema.clock,
        macs_per_cycle=schema.macs_per_cycle,
        buffer_bandwidth=schema.buffer_bandwidth,
        energy_dram_pj_per_byte=schema.energy.dram_pj_per_byte,
        energy_buffer_pj_per_byte=_buffer_pj(schema, spec),
        energy_mac_pj=schema.energy.mac_pj,
        lbdf_buffer=schema.lbdf_buffer,
        dtype_bytes=schema.dtype_bytes,
        description=schema.description,
        source=schema.source,
        weight_buffer_bytes=schema.weight_buffer,
        activation_buffer_bytes=schema.activation_buffer,
        sram=spec,
        buffer_pj_from_sram=schema.energy.buffer_pj_per_byte is None,
    )


# --- error messages -------------------------------------------------------------------------


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxtuple, _REPR.maxset = 3, 4, 4, 4, 4
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 40


def _show(value: Any) -> str:
    """A short repr that never builds the whole of a huge value (reprlib cuts as it goes)."""
    text = _REPR.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _did_you_mean(key: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(choices)})"


def _unknown_key_hint(loc: tuple[Any, ...]) -> str:
    key = str(loc[-1])
    if len(loc) > 1:
        return _did_you_mean(key, _SECTIONS.get(str(loc[0]), _ENERGY_KEYS))
    path = _FIELD_PATHS.get(key)
    if path is not None and len(path) == 2:
        return f" (did you mean {path[1]!r} under {path[0]!r}?)"
    if path is not None:
        return f" (did you mean {path[0]!r}?)"
    return _did_you_mean(key, _TOP_KEYS)


def _describe(error: Mapping[str, Any], labels: Mapping[str, str]) -> str:
    loc = tuple(error["loc"])
    dotted = ".".join(str(part) for part in loc)
    label = labels.get(dotted, f"key {dotted!r}")
    kind = error["type"]
    if kind == "missing":
        return f"missing required {label}"
    if kind == "extra_forbidden":
        return f"unknown {label}{_unknown_key_hint(loc)}"
    if kind == "value_error":
        reason = str(error["ctx"]["error"])
    elif kind == "model_type":
        reason = f"must be a mapping with keys {', '.join(_SECTIONS.get(dotted, _ENERGY_KEYS))}"
    else:
        reason = error["msg"]
    return f"{label} = {_show(error['input'])}: {reason}"


def _validate(
    doc: Mapping[str, Any], origin: str | None, labels: Mapping[str, str] | None = None
) -> HardwareConfig:
    """The `HardwareConfig` a YAML-shaped `doc` describes; errors joined on one line."""
    labels = labels or {}
    full = _with_total(doc)
    if full is not doc:
        labels = {"buffer": "the total weight_buffer + activation_buffer", **labels}
    try:
        schema = _HwSchema.model_validate(full)
    except ValidationError as err:
        # Unknown keys first: a misspelt key also shows up as a missing one.
        errors = sorted(err.errors(), key=lambda e: e["type"] != "extra_forbidden")
        given = [key for key in _SPLIT_KEYS if doc.get(key) is not None]
        if given:  # a bad or lone split capacity, not a missing total
            errors = [e for e in errors if tuple(e["loc"]) != ("buffer",)
                      or e["type"] != "missing"]
        lone = [_lone_split(given[0], doc, labels)] if len(given) == 1 else []
        problems = "; ".join([*(_describe(e, labels) for e in errors), *lone])
        raise HardwareConfigError(f"{origin}: {problems}" if origin else problems) from err
    problem = _split_problem(schema, doc, labels)
    if problem:
        raise HardwareConfigError(f"{origin}: {problem}" if origin else problem)
    sram_problem = _sram_problem(schema, labels)
    if sram_problem:
        raise HardwareConfigError(f"{origin}: {sram_problem}" if origin else sram_problem)
    return _from_schema(schema)


def _sram_problem(schema: _HwSchema, labels: Mapping[str, str]) -> str | None:
    """Why the SRAM table cannot cost one of the buffers (a bank outside its rows), or None."""
    spec = _sram_spec(schema.sram)
    sizes = [schema.buffer, schema.weight_buffer, schema.activation_buffer]
    try:
        for size in sizes:
            if size is not None:
                sram.sram_cost(size, spec)
    except sram.SramError as err:
        label = labels.get("sram.table", "key 'sram.table'")
        source = f" ({spec.table_source})" if spec.table_source else ""
        return f"{label}{source}: {err}"
    return None


def _with_total(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """`doc` with ``buffer`` = weight_buffer + activation_buffer when it gives both split
    capacities (as valid sizes) and no total; otherwise `doc` as it is."""
    if doc.get("buffer") is not None or any(doc.get(key) is None for key in _SPLIT_KEYS):
        return doc
    try:
        total = sum(_in_range(_size, key)(doc[key]) for key in _SPLIT_KEYS)
    except ValueError:
        return doc  # the schema reports the bad capacity by its key
    return {**doc, "buffer": total}


def _lone_split(key: str, doc: Mapping[str, Any], labels: Mapping[str, str]) -> str:
    """The error of a split capacity `key` given without the other."""
    other = next(k for k in _SPLIT_KEYS if k != key)
    label = labels.get(key, f"key {key!r}")
    return (f"{label} = {_show(doc[key])}: a split buffer needs {other!r} too "
            "(leave both out for one shared buffer)")


def _split_problem(schema: _HwSchema, doc: Mapping[str, Any],
                   labels: Mapping[str, str]) -> str | None:
    """Why the split capacities of a schema-valid `schema` do not go together, or None."""
    given = [key for key in _SPLIT_KEYS if getattr(schema, key) is not None]
    if len(given) == 1:
        return _lone_split(given[0], doc, labels)
    if given and schema.buffer != schema.weight_buffer + schema.activation_buffer:
        label = labels.get("buffer", "key 'buffer'")
        return (f"{label} = {_show(doc['buffer'])}: must equal weight_buffer + "
                f"activation_buffer ({schema.weight_buffer + schema.activation_buffer:,} "
                "bytes) or be left out")
    return None


# --- overrides ------------------------------------------------------------------------------


def _override_path(key: Any, origin: str | None) -> tuple[str, ...]:
    path = _FIELD_PATHS.get(key) if isinstance(key, str) else None
    if path is None:
        where = f"{origin}: " if origin else ""
        hint = _did_you_mean(str(key), tuple(_FIELD_PATHS))
        raise HardwareConfigError(f"{where}unknown override {str(key)!r}{hint}")
    return path


def _set_in(doc: dict[str, Any], section: str, key: str, value: Any) -> None:
    """Set `key` of the `section` mapping (``energy``, ``sram``) of `doc`."""
    current = doc.get(section)
    if current is None:
        doc[section] = {key: value}
    elif isinstance(current, Mapping):
        doc[section] = {**current, key: value}
    # else: the document's own section is malformed and is reported as such.


def _rescale_split(doc: dict[str, Any], total: Any, key: str) -> dict[str, str]:
    """A new total `total` for the split buffers of `doc`: both scaled in proportion, the
    weight buffer rounded down (an NVDLA-style partition keeping its share). Returns the
    labels of the changed keys; a value that is not a size is left for validation to name."""
    try:
        new, weights, acts = (_size(v) for v in (total, doc["weight_buffer"],
                                                  doc["activation_buffer"]))
    except ValueError:
        return {}
    share = new * weights // (weights + acts)
    doc["weight_buffer"], doc["activation_buffer"] = share, new - share
    return {k: f"override {key!r} (its {k} share)" for k in _SPLIT_KEYS}


def _merge(
    doc: Mapping[str, Any], overrides: Mapping[str, Any], origin: str | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """`doc` with `overrides` applied, and the error labels of the overridden keys."""
    merged, labels = dict(doc), {}
    overridden = {_override_path(key, origin)[0] for key, value in overrides.items()
                  if value is not None}
    split_after = all(key in overridden or merged.get(key) is not None for key in _SPLIT_KEYS)
    if overridden & set(_SPLIT_KEYS) and split_after and "buffer" not in overridden:
        merged.pop("buffer", None)  # the total follows from the split capacities
    elif overridden & {"buffer", *_SPLIT_KEYS} == {"buffer"} and all(
            merged.get(key) is not None for key in _SPLIT_KEYS):
        key, total = next((k, v) for k, v in overrides.items()
                          if v is not None and _override_path(k, origin) == ("buffer",))
        labels.update(_rescale_split(merged, total, key))
    for key, value in overrides.items():
        if value is None or key == "buffer_pj_from_sram":
            continue
        path = _override_path(key, origin)
        if len(path) == 1 and path[0] in _SECTIONS and isinstance(value, Mapping):
            for sub, sub_value in value.items():
                _set_in(merged, path[0], str(sub), sub_value)
                labels[f"{path[0]}.{sub}"] = f"override '{path[0]}.{sub}'"
        elif len(path) == 2:
            _set_in(merged, path[0], path[1], value)
            if path == ("sram", "table") and isinstance(value, str):
                _set_in(merged, "sram", "table_source", value)
            labels[".".join(path)] = f"override {key!r}"
        else:
            merged[path[0]] = value
            labels[path[0]] = f"override {key!r}"
    if overrides.get("buffer_pj_from_sram"):  # after energy.buffer_pj_per_byte: it wins
        _set_in(merged, "energy", "buffer_pj_per_byte", "sram")
    return merged, labels


# --- loading --------------------------------------------------------------------------------


def _canonical(name: str) -> str:
    return re.sub(r"[-_.\s]", "", name.lower())


def preset_dir() -> Traversable:
    """The installed ``hwconfigs`` data package holding the presets (`importlib.resources`).

    Raises:
        HardwareConfigError: The package is not installed (a broken installation).
    """
    try:
        return importlib.resources.files(PRESET_PACKAGE)
    except ModuleNotFoundError as err:
        raise HardwareConfigError(
            f"no hardware presets: the {PRESET_PACKAGE!r} package of fusion-dse is not "
            "installed; reinstall fusion-dse or give a path to a .yaml file"
        ) from err


def _preset_files() -> dict[str, Traversable]:
    return {
        PurePath(p.name).stem: p
        for p in preset_dir().iterdir()
        if p.is_file() and p.name.endswith((".yaml", ".yml"))
    }


def list_presets() -> list[str]:
    """Names of the preset hardware configurations (``hwconfigs/*.yaml``), sorted."""
    return sorted(_preset_files())


def _preset_path(name: str) -> Traversable | None:
    wanted = _canonical(name)
    return next((p for stem, p in _preset_files().items() if _canonical(stem) == wanted), None)


def _unknown_preset(name: str) -> HardwareConfigError:
    presets = list_presets()
    close = difflib.get_close_matches(name.lower(), presets, n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return HardwareConfigError(
        f"unknown hardware preset {name!r}{hint}; presets: {', '.join(presets)}; "
        "or give a path to a .yaml file"
    )


def _looks_like_path(spec: str) -> bool:
    return spec.lower().endswith((".yaml", ".yml")) or "/" in spec or os.sep in spec


def _locate(spec: str | os.PathLike[str]) -> tuple[Traversable, str]:
    """The file `spec` names and how to name it in messages."""
    text = os.fspath(spec)
    if any(len(part) > limits.MAX_NAME_CHARS for part in PurePath(text).parts):
        raise HardwareConfigError(f"hardware config {text[:40]!r}...: a name longer than "
                                  f"{limits.MAX_NAME_CHARS} characters")
    if isinstance(spec, os.PathLike) or _looks_like_path(text):
        path = Path(text).expanduser()
        if not path.is_file():
            reason = ("is a directory" if path.is_dir()
                      else "not a regular file" if path.exists() else "no such file")
            raise HardwareConfigError(f"hardware config {text!r}: {reason}")
        return path, text
    preset = _preset_path(text)
    if preset is not None:
        return preset, f"{PRESET_PACKAGE}/{preset.name}"
    if Path(text).is_file():
        return Path(text), text
    raise _unknown_preset(text)


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that rejects duplicate keys instead of keeping the last one silently."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    max_nodes = limits.MAX_YAML_NODES

    def compose_document(self) -> yaml.Node:  # type: ignore[override]
        node = super().compose_document()
        _check_expansion(node, self.max_nodes)
        return node


def _check_expansion(root: yaml.Node, limit: int = limits.MAX_YAML_NODES) -> None:
    """Refuse a document whose aliases expand to more than `limit` nodes (billion laughs);
    counted over the shared node graph without expanding or recursing."""
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in size:
            continue
        children = _children(node)
        if done or not children:
            total = 1 + sum(size.get(id(c), 0) for c in children)
            if total > limit:
                raise yaml.constructor.ConstructorError(
                    None, None, f"expands to more than {limit:,} values (aliases)",
                    node.start_mark)
            size[id(node)] = total
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_yaml_depth(text: str, origin: str,
                      error: type[InputError] = HardwareConfigError) -> None:
    """Refuse nesting deeper than `limits.MAX_YAML_DEPTH` from the parser's events (the
    parser keeps a stack, the composer recurses), before anything is built."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limits.MAX_YAML_DEPTH:
                raise error(f"{origin}: nested more than {limits.MAX_YAML_DEPTH} levels deep")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _yaml_error(origin: str, err: yaml.YAMLError,
                error: type[InputError] = HardwareConfigError) -> InputError:
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = getattr(err, "problem", None) or str(err)
    context, start = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and start is not None and (mark is None or start.line != mark.line):
        problem += f" ({context} at line {start.line + 1})"
    return error(f"{origin}: {where}malformed YAML: {limits.escape_controls(problem)[:200]}")


def load_yaml(text: str, origin: str, error: type[InputError] = HardwareConfigError,
              max_nodes: int = limits.MAX_YAML_NODES) -> Any:
    """A YAML document read safely: nesting deeper than `limits.MAX_YAML_DEPTH` is refused
    before anything is built, aliases expanding to more than `max_nodes` values (billion
    laughs), duplicate keys and tags other than the plain ones (``!!python/...``) are refused;
    every refusal is one `error` line naming `origin` (and the line and column)."""
    loader = type("_Loader", (_UniqueKeyLoader,), {"max_nodes": max_nodes})
    try:
        _check_yaml_depth(text, origin, error)
        return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        raise _yaml_error(origin, err, error) from err
    except RecursionError as err:
        raise error(f"{origin}: nested too deeply") from err
    except InputError:
        raise
    except ValueError as err:  # an integer over Python's 4,300 digits
        raise error(f"{origin}: a number of more than 4,300 digits") from err


def _read_text(path: Traversable, origin: str) -> str:
    if isinstance(path, Path):
        return limits.read_text(path, "hardware config", f"hardware config {origin!r}",
                                HardwareConfigError)
    try:  # a preset inside the installed package
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise HardwareConfigError(f"{origin}: cannot read: {err}") from err


def _read_yaml(path: Traversable, origin: str) -> dict[str, Any]:
    doc = load_yaml(_read_text(path, origin), origin)
    if not isinstance(doc, dict):
        got = "nothing" if doc is None else f"a {type(doc).__name__} ({_show(doc)})"
        raise HardwareConfigError(f"{origin}: must be a mapping of keys to values, got {got}")
    return doc


def load_hw(
    spec: str | os.PathLike[str], overrides: Mapping[str, Any] | None = None
) -> HardwareConfig:
    """Load and validate a hardware configuration.

    Args:
        spec: A preset name (``edge-npu``; case, ``-`` and ``_`` ignored; see `list_presets`)
            or a path to a YAML file. A string ending in ``.yaml``/``.yml`` or containing a
            path separator is always a path.
        overrides: Keys replacing the file's values before validation, e.g.
            ``{"buffer": "128KiB"}``; see `HardwareConfig.with_overrides`. None values are
            ignored, so optional CLI flags can be passed straight through.

    Returns:
        The validated configuration; its name defaults to the file name.

    Raises:
        HardwareConfigError: A one-line message naming the file, the key and the bad value
            (or the override), the YAML line of a syntax error, or the known presets.
    """
    path, origin = _locate(spec)
    doc = _read_yaml(path, origin)
    doc.setdefault("name", PurePath(path.name).stem)
    _table_beside(doc, path)
    merged, labels = _merge(doc, overrides or {}, origin)
    return _validate(merged, origin, labels)


def _table_beside(doc: dict[str, Any], path: Traversable) -> None:
    """A file's ``sram.table`` file name read relative to the file's folder (recorded as
    ``sram.table_source`` as written)."""
    section = doc.get("sram")
    table = section.get("table") if isinstance(section, dict) else None
    if not isinstance(table, str) or not isinstance(path, Path):
        return
    where = path.parent / Path(table).expanduser()
    doc["sram"] = {**section, "table": str(where),
                   "table_source": section.get("table_source", table)}

"""On-chip SRAM cost by capacity: area, access energy and leakage power (docs/hardware.md).

A buffer of C bytes is built from `SramSpec.banks` equal banks of C / banks bytes each (one
bank is accessed at a time). By default:

* **access energy** (read or write, pJ per byte): Horowitz's 45 nm figures for a 64-bit read
  (M. Horowitz, "Computing's energy problem (and what we can do about it)", ISSCC 2014:
  8 KB 10 pJ, 32 KB 20 pJ, 1 MB 100 pJ), interpolated linearly in log(capacity) - log(energy)
  at the bank's capacity (outside 8 KB..1 MB the nearest segment's slope continues), divided by
  the 8 bytes of the word, times the node's energy factor (`NODES`: CACTI 7's read energy of a
  32 KiB RAM at that node over its read energy at 45 nm). Writes are charged as reads (CACTI 7
  puts a 45 nm write 10-14 % below a read: the figure is an upper bound for them);
* **area** (mm^2): bits x the node's published 6T bitcell area / `SramSpec.array_efficiency`
  (the fraction of a macro's area that is bitcells; 0.7 assumed, CACTI 7 reports 71-82 % for
  its 45 nm RAMs of 8 KiB..1 MiB);
* **leakage power** (mW): bits x the node's leakage per bit (`NODES`: CACTI 7, ITRS low
  standby power cells and peripherals, 350 K, a 256 KiB RAM of 64-bit words), or
  `SramSpec.leakage_pw_per_bit`.

A user table (`SramSpec.table`: rows of a macro's capacity, area, energy per access of
`SramSpec.word_bytes` and leakage, from a CSV file or the YAML) replaces all three: figures are
interpolated log-log between its rows at the bank's capacity and scaled by the bank count;
a bank outside the table's capacities is refused (`SramError`), never extrapolated.

Everything here is a pure function of (capacity, `SramSpec`); `sram_cost` is memoised because
the cost models read it for every group they cost.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_ARRAY_EFFICIENCY",
    "DEFAULT_NODE_NM",
    "HOROWITZ_READ_PJ",
    "NODES",
    "TABLE_COLUMNS",
    "Node",
    "SramCost",
    "SramError",
    "SramRow",
    "SramSpec",
    "horowitz_read_pj",
    "parse_table",
    "sram_cost",
]

KIB, MIB = 1024, 1024 * 1024

HOROWITZ_READ_PJ: tuple[tuple[int, float], ...] = ((8 * KIB, 10.0), (32 * KIB, 20.0),
                                                    (MIB, 100.0))
"""(capacity in bytes, pJ per 64-bit read) at 45 nm: Horowitz, ISSCC 2014 (his KB and MB read
as binary, the convention of `simulator.hw.parse_size`)."""
HOROWITZ_WORD_BYTES = 8
DEFAULT_NODE_NM = 45
DEFAULT_ARRAY_EFFICIENCY = 0.7
TABLE_COLUMNS = ("capacity", "area_mm2", "pj_per_access", "leakage_mw")
"""The columns of a user SRAM table (CSV header or YAML keys of each row)."""
MAX_TABLE_ROWS = 1000


class SramError(ValueError):
    """An SRAM description that cannot cost a buffer (a capacity outside the user table)."""


@dataclass(frozen=True, slots=True)
class Node:
    """One technology node's figures.

    Attributes:
        bitcell_um2: The 6T SRAM bitcell area, from the publication in `bitcell_source`.
        bitcell_source: Where the bitcell area is published.
        energy_factor: CACTI 7 (itrs-lstp, 350 K) read energy of a 32 KiB RAM of 64-bit words
            at this node over the same at 45 nm.
        leakage_pw_per_bit: CACTI 7 "Total leakage power of a bank" of a 256 KiB RAM of 64-bit
            words (itrs-lstp cells and peripherals, 350 K) over its bits.
    """

    bitcell_um2: float
    bitcell_source: str
    energy_factor: float
    leakage_pw_per_bit: float


NODES: dict[int, Node] = {
    90: Node(1.0, "Intel 90 nm, Thompson et al., IEDM 2002", 3.157, 17.01),
    65: Node(0.57, "Intel 65 nm, Bai et al., IEDM 2004", 1.769, 30.88),
    45: Node(0.346, "Intel 45 nm, Mistry et al., IEDM 2007", 1.0, 22.09),
    32: Node(0.171, "Intel 32 nm, Natarajan et al., IEDM 2008", 0.4865, 26.77),
    28: Node(0.127, "TSMC 28 nm, Wu et al., Symp. VLSI Technology 2009", 0.3637, 52.20),
    22: Node(0.092, "Intel 22 nm, Auth et al., Symp. VLSI Technology 2012", 0.2229, 66.86),
}
"""Technology nodes (nm) of the default model: CACTI 7's range, 90 to 22 nm. CACTI 7 figures
measured with the configuration in docs/hardware.md."""


@dataclass(frozen=True, slots=True)
class SramRow:
    """One row of a user SRAM table: a macro of `capacity_bytes`."""

    capacity_bytes: int
    area_mm2: float
    pj_per_access: float
    leakage_mw: float


@dataclass(frozen=True, slots=True)
class SramSpec:
    """How the on-chip buffers are built (the hardware YAML's ``sram`` section).

    Attributes:
        node_nm: Technology node, a key of `NODES`.
        banks: Equal banks a buffer is split into; the access energy is a bank's.
        word_bytes: Bytes of one access (converts a table's pJ per access to pJ per byte; the
            default model's energy per byte does not depend on it).
        array_efficiency: Bitcell area over macro area.
        leakage_pw_per_bit: Leakage per bit in pW; None: the node's (`NODES`).
        table: A user table replacing the default model; empty: the model.
        table_source: Where the table came from (a file name, or ``inline``).
        source: Citation of the figures.
    """

    node_nm: int = DEFAULT_NODE_NM
    banks: int = 1
    word_bytes: int = HOROWITZ_WORD_BYTES
    array_efficiency: float = DEFAULT_ARRAY_EFFICIENCY
    leakage_pw_per_bit: float | None = None
    table: tuple[SramRow, ...] = ()
    table_source: str = ""
    source: str = ""

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> SramSpec:
        """The spec `to_dict` or `dataclasses.asdict` wrote (already validated values)."""
        rows = tuple(r if isinstance(r, SramRow) else SramRow(**r) for r in doc.get("table", ()))
        return cls(**{**doc, "table": rows})

    def to_dict(self) -> dict[str, Any]:
        """The spec as the YAML ``sram`` section (a table inline, sizes in bytes)."""
        doc: dict[str, Any] = {"node_nm": self.node_nm, "banks": self.banks,
                               "word_bytes": self.word_bytes,
                               "array_efficiency": self.array_efficiency}
        if self.leakage_pw_per_bit is not None:
            doc["leakage_pw_per_bit"] = self.leakage_pw_per_bit
        if self.table:
            doc["table"] = [{"capacity": r.capacity_bytes, "area_mm2": r.area_mm2,
                             "pj_per_access": r.pj_per_access, "leakage_mw": r.leakage_mw}
                            for r in self.table]
            doc["table_source"] = self.table_source
        if self.source:
            doc["source"] = self.source
        return doc


@dataclass(frozen=True, slots=True)
class SramCost:
    """What a buffer of `capacity_bytes` costs.

    Attributes:
        capacity_bytes: The buffer's capacity.
        banks: Banks it is built from.
        area_mm2: Silicon area of all its banks.
        pj_per_byte: Energy of reading or writing one byte (one bank accessed).
        leakage_mw: Leakage power of all its banks.
        model: ``"horowitz-45nm"`` scaled to a node (``"... x 0.4865 (32 nm)"``), or
            ``"table"``.
    """

    capacity_bytes: int
    banks: int
    area_mm2: float
    pj_per_byte: float
    leakage_mw: float
    model: str

    def leakage_pj_per_cycle(self, clock_hz: float) -> float:
        """Leakage energy per clock cycle: mW x 1e-3 W/mW / clock x 1e12 pJ/J."""
        return self.leakage_mw * 1e9 / clock_hz

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready figures."""
        return {"capacity_bytes": self.capacity_bytes, "banks": self.banks,
                "area_mm2": self.area_mm2, "pj_per_byte": self.pj_per_byte,
                "leakage_mw": self.leakage_mw, "model": self.model}


def _loglog(points: tuple[tuple[float, float], ...], x: float) -> float:
    """y at `x` on the piecewise linear curve through `points` in log-log space (ascending x);
    beyond the ends the first or last segment continues."""
    k = 1
    while k < len(points) - 1 and x > points[k][0]:
        k += 1
    (x0, y0), (x1, y1) = points[k - 1], points[k]
    slope = math.log(y1 / y0) / math.log(x1 / x0)
    return y0 * (x / x0) ** slope


def horowitz_read_pj(capacity_bytes: float) -> float:
    """pJ per 64-bit read of a `capacity_bytes` SRAM at 45 nm, on `HOROWITZ_READ_PJ`
    (Horowitz, ISSCC 2014), log-log interpolated."""
    return _loglog(tuple((float(c), e) for c, e in HOROWITZ_READ_PJ), capacity_bytes)


def _table_point(rows: tuple[SramRow, ...], bank: float, what: str) -> float:
    exact = next((r for r in rows if r.capacity_bytes == bank), None)
    if exact is not None:  # a row's own figure, not its round trip through logarithms
        return float(getattr(exact, what))
    points = tuple((float(r.capacity_bytes), float(getattr(r, what))) for r in rows)
    if any(y <= 0 for _, y in points):  # log-log needs positive figures: linear instead
        k = next(i for i in range(1, len(points)) if bank <= points[i][0])
        (x0, y0), (x1, y1) = points[k - 1], points[k]
        return y0 + (y1 - y0) * (bank - x0) / (x1 - x0)
    return _loglog(points, bank)


def _from_table(capacity: int, spec: SramSpec) -> SramCost:
    rows, bank = spec.table, capacity / spec.banks
    low, high = rows[0].capacity_bytes, rows[-1].capacity_bytes
    if not low <= bank <= high:
        raise SramError(f"a bank of {_size(bank)} ({_size(capacity)} in {spec.banks} banks) "
                        f"is outside the SRAM table's capacities {_size(low)}..{_size(high)}")
    return SramCost(
        capacity_bytes=capacity, banks=spec.banks,
        area_mm2=_table_point(rows, bank, "area_mm2") * spec.banks,
        pj_per_byte=_table_point(rows, bank, "pj_per_access") / spec.word_bytes,
        leakage_mw=_table_point(rows, bank, "leakage_mw") * spec.banks, model="table")


@functools.lru_cache(maxsize=4096)
def sram_cost(capacity_bytes: int, spec: SramSpec) -> SramCost:
    """Area, energy per byte and leakage of a buffer of `capacity_bytes` built as `spec` says.

    Raises:
        SramError: `spec` has a table and a bank's capacity lies outside it.
    """
    if spec.table:
        return _from_table(capacity_bytes, spec)
    node = NODES[spec.node_nm]
    bits = capacity_bytes * 8
    leak = node.leakage_pw_per_bit if spec.leakage_pw_per_bit is None else spec.leakage_pw_per_bit
    model = ("horowitz-45nm" if spec.node_nm == 45
             else f"horowitz-45nm x {node.energy_factor:g} ({spec.node_nm} nm)")
    return SramCost(
        capacity_bytes=capacity_bytes, banks=spec.banks,
        area_mm2=bits * node.bitcell_um2 / spec.array_efficiency * 1e-6,
        pj_per_byte=horowitz_read_pj(capacity_bytes / spec.banks) * node.energy_factor
        / HOROWITZ_WORD_BYTES,
        leakage_mw=bits * leak * 1e-9, model=model)


# --- user tables ------------------------------------------------------------------------------


def _size(size: float) -> str:
    return f"{size / MIB:g} MiB" if size >= MIB else f"{size / KIB:g} KiB"


def _number(value: Any, column: str) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"{column} {value[:30]!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{column} {str(value)[:30]!r} is not a finite number")
    if value < 0:
        raise ValueError(f"{column} {value:g} is negative")
    return float(value)


def _row(raw: Mapping[str, Any], where: str, parse_size: Any) -> SramRow:
    if "capacity_bytes" in raw and "capacity" not in raw:  # a row as `SramRow` names it
        raw = {("capacity" if k == "capacity_bytes" else k): v for k, v in raw.items()}
    keys = set(raw)
    missing = [c for c in TABLE_COLUMNS if c not in keys]
    extra = sorted(str(k) for k in keys - set(TABLE_COLUMNS))
    if missing or extra:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unknown {', '.join(extra)}"] if extra else [])
        raise ValueError(f"{where}: {'; '.join(parts)} (columns: {', '.join(TABLE_COLUMNS)})")
    try:
        capacity = parse_size(raw["capacity"])
        figures = [_number(raw[c], c) for c in TABLE_COLUMNS[1:]]
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    if figures[0] <= 0:
        raise ValueError(f"{where}: area_mm2 must be positive")
    return SramRow(capacity, *figures)


def parse_table(value: str | Iterable[Any], what: str, parse_size: Any) -> tuple[SramRow, ...]:
    """The rows of a user SRAM table, ascending in capacity.

    Args:
        value: CSV text (a header naming `TABLE_COLUMNS`, ``#`` comment lines allowed) or a
            list of mappings with those keys (a YAML table).
        what: How to name the table in errors.
        parse_size: Reads a capacity (``32KiB``, ``32768``) or raises ValueError(reason).

    Raises:
        ValueError: One line naming the row and what is wrong with it; no rows; more than
            `MAX_TABLE_ROWS`; two rows of one capacity.
    """
    if isinstance(value, str):
        lines = [ln for ln in value.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        raw: list[Any] = list(csv.DictReader(io.StringIO("\n".join(lines)),
                                              skipinitialspace=True))
        first = 2
    else:
        raw, first = list(value), 1
    if not raw:
        raise ValueError(f"{what}: no rows (columns: {', '.join(TABLE_COLUMNS)})")
    if len(raw) > MAX_TABLE_ROWS:
        raise ValueError(f"{what}: more than {MAX_TABLE_ROWS} rows")
    rows = []
    for k, r in enumerate(raw):
        if not isinstance(r, Mapping):
            raise ValueError(f"{what} row {k + first}: must be a mapping of "
                             f"{', '.join(TABLE_COLUMNS)}")
        if None in r:  # csv: more fields than the header names
            raise ValueError(f"{what} row {k + first}: more fields than the header")
        rows.append(_row({str(key).strip(): v for key, v in r.items()},
                         f"{what} row {k + first}", parse_size))
    rows.sort(key=lambda r: r.capacity_bytes)
    for a, b in zip(rows, rows[1:], strict=False):
        if a.capacity_bytes == b.capacity_bytes:
            raise ValueError(f"{what}: two rows of capacity {_size(a.capacity_bytes)}")
    return tuple(rows)

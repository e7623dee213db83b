"""Hardware configurations: presets, sizes, overrides and one-line errors for bad configs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from simulator.errors import InputError
from simulator.hw import (
    HardwareConfig,
    HardwareConfigError,
    format_size,
    list_presets,
    load_hw,
    parse_size,
    preset_dir,
)

PRESETS = ["edge-npu", "eyeriss", "nvdla-small", "nvdla-split", "tpu-v1"]

VALID = {
    "name": "toy",
    "buffer": "256KiB",
    "dram_bandwidth": 16,
    "dram_latency": 100,
    "clock": "1GHz",
    "macs_per_cycle": 1024,
    "buffer_bandwidth": 128,
    "energy": {"dram_pj_per_byte": 160, "buffer_pj_per_byte": 2.5, "mac_pj": 0.3},
}


def write(tmp_path: Path, doc: object, name: str = "toy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc), encoding="utf-8")
    return path


def with_(**changes: object) -> dict:
    doc = {**VALID, **changes}
    return {k: v for k, v in doc.items() if v is not None}


def error_of(spec: object, overrides: dict | None = None) -> str:
    with pytest.raises(HardwareConfigError) as info:
        load_hw(spec, overrides)
    message = str(info.value)
    assert "\n" not in message
    return message


# --- presets --------------------------------------------------------------------------------


def test_presets_are_listed():
    assert list_presets() == PRESETS


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_loads_frozen_and_hashable(name):
    hw = load_hw(name)
    assert hw.name == name and hw.source and hw.description
    assert hash(hw) == hash(load_hw(name)) and hw == load_hw(name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        hw.buffer_bytes = 1  # type: ignore[misc]
    assert load_hw(Path(str(preset_dir() / f"{name}.yaml"))) == hw


@pytest.mark.parametrize("name", PRESETS)
def test_preset_round_trips_through_to_dict_as_json(name):
    hw = load_hw(name)
    doc = json.loads(json.dumps(hw.to_dict()))
    assert isinstance(doc["buffer_bytes"], int)
    assert HardwareConfig(**doc) == hw
    assert hw.with_overrides() == hw


def test_preset_figures():
    edge, eyeriss, tpu, nvdla = (load_hw(n) for n in ("edge-npu", "eyeriss", "tpu-v1",
                                                       "nvdla-small"))
    assert (edge.buffer_bytes, edge.dtype_bytes, edge.clock_hz) == (262144, 1, 1e9)
    assert (eyeriss.macs_per_cycle, eyeriss.buffer_bytes, eyeriss.dtype_bytes) == (168, 110592, 2)
    assert eyeriss.clock_hz == 200e6
    assert (tpu.macs_per_cycle, tpu.buffer_bytes, tpu.clock_hz) == (65536, 24 * 2**20, 700e6)
    assert tpu.dram_bandwidth == pytest.approx(30 * 2**30 / 700e6, rel=1e-3)
    assert (nvdla.macs_per_cycle, nvdla.buffer_bytes, nvdla.dram_bandwidth) == (64, 131072, 8)


def test_preset_names_are_forgiving_about_case_and_separators():
    assert load_hw("TPU_v1") == load_hw("tpu-v1")


def test_unknown_preset_lists_the_presets():
    message = error_of("tpu")
    assert "'tpu'" in message and "did you mean 'tpu-v1'" in message
    assert all(name in message for name in PRESETS)


def test_missing_file_is_named(tmp_path):
    missing = tmp_path / "nope.yaml"
    assert str(missing) in error_of(missing) and "no such file" in error_of(str(missing))


# --- parse_size -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("256KiB", 262144),
        ("2MiB", 2097152),
        ("131072", 131072),
        (131072, 131072),
        ("1.5MiB", 1572864),
        ("64kB", 65536),
        ("64KB", 65536),
        ("2 MiB", 2097152),
        ("1GiB", 2**30),
        ("512B", 512),
        (4096.0, 4096),
    ],
)
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("12XB", "unknown size unit 'XB'"),
        ("64Kb", "bits"),
        ("0", "must be positive"),
        (0, "must be positive"),
        ("-1KiB", "must be positive"),
        (-5, "must be positive"),
        ("1.3KiB", "whole number of bytes"),
        ("0.5B", "whole number of bytes"),
        (1.5, "whole number"),
        ("big", "not a size"),
        (True, "must be a number"),
    ],
)
def test_parse_size_rejects(text, reason):
    with pytest.raises(HardwareConfigError) as info:
        parse_size(text)
    assert isinstance(info.value, InputError)
    assert repr(text) in str(info.value) and reason in str(info.value)


@given(st.integers(min_value=1, max_value=2**40))
def test_parse_size_is_exact_for_kib_multiples(n):
    assert parse_size(f"{n}KiB") == n * 1024 and parse_size(str(n)) == n


# --- overrides ------------------------------------------------------------------------------


def test_overrides_in_load_hw():
    hw = load_hw("edge-npu", {"buffer": "128KiB", "clock": "200 MHz", "energy.mac_pj": 0.23,
                              "dtype_bytes": None})
    assert (hw.buffer_bytes, hw.clock_hz, hw.energy_mac_pj) == (131072, 200e6, 0.23)
    assert hw.dtype_bytes == 1 and hw.energy_dram_pj_per_byte == 160


def test_with_overrides_accepts_yaml_keys_and_field_names():
    base = load_hw("edge-npu")
    hw = base.with_overrides(buffer="2MiB", energy={"buffer_pj_per_byte": 1.25})
    assert hw.buffer_bytes == 2097152 and hw.energy_buffer_pj_per_byte == 1.25
    assert hw.energy_mac_pj == base.energy_mac_pj and base.buffer_bytes == 262144
    assert base.with_overrides(buffer_bytes=524288, clock_hz=5e8).clock_hz == 5e8
    assert hash(hw) != hash(base)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"buffer": "12XB"}, "override 'buffer' = '12XB': unknown size unit 'XB'"),
        ({"dram_bandwidth": -4}, "override 'dram_bandwidth' = -4: must be positive"),
        ({"energy.mac_pj": -1}, "override 'energy.mac_pj' = -1: must not be negative"),
        ({"bufer": "1MiB"}, "unknown override 'bufer' (did you mean 'buffer'?)"),
        ({"buffer_bytes": 0}, "override 'buffer_bytes' = 0: must be positive"),
    ],
)
def test_bad_overrides_are_named(overrides, expected):
    message = error_of("edge-npu", overrides)
    assert message.startswith("hwconfigs/edge-npu.yaml: ") and expected in message
    with pytest.raises(HardwareConfigError, match="override"):
        load_hw("edge-npu").with_overrides(**overrides)


def test_field_names_are_validated_by_the_schema():
    base = load_hw("edge-npu")
    fields = base.to_dict()
    assert base.with_overrides(**fields) == base
    with pytest.raises(HardwareConfigError, match="'dram_latency' = -1: must not be negative"):
        base.with_overrides(**{**fields, "dram_latency": -1})


def test_lbdf_buffer_granularity_defaults_to_the_pixel_line_buffer(tmp_path):
    # docs/cost-model.md 4.1: `pixel` (the paper's Fig. 1 line buffer) unless the file or an
    # override says `row`; spelled in any case; anything else is one clear line
    assert load_hw("edge-npu").lbdf_buffer == "pixel"
    assert load_hw(write(tmp_path, with_(lbdf_buffer="row"))).lbdf_buffer == "row"
    assert load_hw("edge-npu", {"lbdf_buffer": "Row"}).lbdf_buffer == "row"
    assert load_hw("edge-npu").with_overrides(lbdf_buffer="row").to_dict()["lbdf_buffer"] == \
        "row"
    message = error_of(write(tmp_path, with_(lbdf_buffer="pixels")))
    assert "key 'lbdf_buffer' = 'pixels': must be 'pixel'" in message and "or 'row'" in message
    assert "override 'lbdf_buffer' = 2: must be 'pixel'" in error_of("edge-npu",
                                                                     {"lbdf_buffer": 2})
    assert "did you mean 'lbdf_buffer'?" in error_of("edge-npu", {"lbdf_bufer": "row"})


# --- bad files: one line naming the file, the key and the value -----------------------------


def test_valid_file_loads_and_name_defaults_to_file_stem(tmp_path):
    hw = load_hw(write(tmp_path, with_(name=None), "my-npu.yaml"))
    assert hw.name == "my-npu" and hw.buffer_bytes == 262144 and hw.dtype_bytes == 1


def test_yaml_1_1_exponent_strings_are_numbers(tmp_path):
    path = write(tmp_path, "\n".join(f"{k}: {v}" for k, v in {
        **with_(energy=None), "clock": "1e9", "dram_bandwidth": "1.6e1"}.items())
        + "\nenergy: {dram_pj_per_byte: 160, buffer_pj_per_byte: 2.5, mac_pj: 3e-1}\n")
    hw = load_hw(path)
    assert (hw.clock_hz, hw.dram_bandwidth, hw.energy_mac_pj) == (1e9, 16.0, 0.3)


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (with_(bufer="256KiB"), "unknown key 'bufer' (did you mean 'buffer'?)"),
        (with_(buffer="12XB"),
         "key 'buffer' = '12XB': unknown size unit 'XB' (use B, KiB, MiB, GiB)"),
        (with_(buffer=0), "key 'buffer' = 0: must be positive"),
        (with_(buffer="-128KiB"), "key 'buffer' = '-128KiB': must be positive"),
        (with_(dram_bandwidth=-4), "key 'dram_bandwidth' = -4: must be positive"),
        (with_(clock=None), "missing required key 'clock'"),
        (with_(clock="fast"), "key 'clock' = 'fast': not a frequency"),
        (with_(clock="1THz"), "key 'clock' = '1THz': unknown clock unit 'THz'"),
        (with_(clock=700), "key 'clock' = 700: 700 Hz is implausibly low"),
        (with_(dtype_bytes=16), "key 'dtype_bytes' = 16: must be 1, 2, 4 or 8"),
        (with_(macs_per_cycle=10.5), "key 'macs_per_cycle' = 10.5: must be a whole number"),
        (with_(name=7), "key 'name' = 7: must be a string"),
        (with_(energy=5), "key 'energy' = 5: must be a mapping"),
        (with_(energy={"dram_pj_per_byte": 160, "buffer_pj_per_byte": 2.5}),
         "missing required key 'energy.mac_pj'"),
        (with_(energy={**VALID["energy"], "mac_pjj": 1}),
         "unknown key 'energy.mac_pjj' (did you mean 'mac_pj'?)"),
        (with_(clock_hz=1e9, clock=None), "unknown key 'clock_hz' (did you mean 'clock'?)"),
    ],
)
def test_bad_config_errors_name_file_key_and_value(tmp_path, doc, expected):
    path = write(tmp_path, doc)
    message = error_of(path)
    assert message.startswith(f"{path}: ") and expected in message


def test_missing_keys_are_all_named(tmp_path):
    message = error_of(write(tmp_path, with_(clock=None, macs_per_cycle=None)))
    assert "missing required key 'clock'" in message
    assert "missing required key 'macs_per_cycle'" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("buffer: 1KiB\nmacs_per_cycle: [1, 2\nclock: 1GHz\n", "line 3, column 6: malformed YAML"),
        ("buffer: 1KiB\n  clock: 1GHz: x\n", "line 2"),
        ("buffer: 1KiB\nbuffer: 2KiB\n", "line 2, column 1: malformed YAML: duplicate key"),
    ],
)
def test_malformed_yaml_names_file_and_line(tmp_path, text, expected):
    path = write(tmp_path, text)
    message = error_of(path)
    assert message.startswith(f"{path}: ") and expected in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [("- a\n- b\n", "got a list"), ("just text\n", "got a str"), ("", "got nothing")],
)
def test_yaml_that_is_not_a_mapping(tmp_path, text, expected):
    path = write(tmp_path, text)
    message = error_of(path)
    assert message.startswith(f"{path}: must be a mapping") and expected in message


# --- presets are package data ---------------------------------------------------------------


def test_presets_come_from_the_hwconfigs_package_not_the_source_tree():
    import hwconfigs

    assert Path(str(preset_dir())) == Path(hwconfigs.__file__).parent
    shipped = sorted(p.name for p in preset_dir().iterdir() if p.name.endswith(".yaml"))
    assert shipped == [f"{name}.yaml" for name in PRESETS]


def test_the_package_data_declares_the_presets():
    import tomllib

    root = Path(__file__).resolve().parents[2]
    setup = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "hwconfigs" in setup["packages"]["find"]["include"]
    assert "*.yaml" in setup["package-data"]["hwconfigs"]


@pytest.mark.parametrize(("size", "text"), [(65536, "64 KiB"), (2**21, "2 MiB"),
                                             (1536, "1.5 KiB"), (3 * 2**19, "1.5 MiB")])
def test_format_size_labels_sizes_as_parse_size_reads_them(size, text):
    assert format_size(size) == text
    assert parse_size(text.replace(" ", "")) == size

"""Split buffers in the hardware description (`simulator.hw`): the YAML keys
``weight_buffer`` / ``activation_buffer``, their total, overrides and one-line errors; a
shared configuration is what it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.hw import HardwareConfigError, load_hw

BASE = """\
name: t
dram_bandwidth: 8
dram_latency: 10
clock: 1GHz
macs_per_cycle: 64
buffer_bandwidth: 16
energy: {dram_pj_per_byte: 100, buffer_pj_per_byte: 1, mac_pj: 0.5}
"""


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hw.yaml"
    path.write_text(BASE + text)
    return path


def test_a_shared_buffer_is_unchanged():
    hw = load_hw("edge-npu")
    assert not hw.is_split and hw.buffers == (("shared", 262144),)
    assert hw.weight_capacity == hw.activation_capacity == hw.buffer_bytes == 262144
    assert hw.fits(200_000, 62_144) and not hw.fits(200_000, 62_145)
    assert "weight_buffer_bytes" not in hw.to_dict()  # sweep keys hashed from it unchanged


@pytest.mark.parametrize("extra", ["", "buffer: 96KiB\n"])
def test_two_capacities_make_a_split_machine_whose_total_is_the_buffer(tmp_path, extra):
    hw = load_hw(_file(tmp_path, "weight_buffer: 32KiB\nactivation_buffer: 64KiB\n" + extra))
    assert hw.is_split and hw.buffer_bytes == 96 * 1024
    assert hw.buffers == (("weights", 32 * 1024), ("activations", 64 * 1024))
    assert (hw.weight_capacity, hw.activation_capacity) == (32 * 1024, 64 * 1024)
    assert hw.fits(32 * 1024, 64 * 1024)
    assert not hw.fits(32 * 1024 + 1, 0) and not hw.fits(0, 64 * 1024 + 1)
    assert hw.to_dict()["weight_buffer_bytes"] == 32 * 1024


@pytest.mark.parametrize("text, message", [
    ("weight_buffer: 32KiB\nactivation_buffer: 64KiB\nbuffer: 128KiB\n",
     "key 'buffer' = '128KiB': must equal weight_buffer + activation_buffer (98,304 bytes)"),
    ("weight_buffer: 32KiB\nbuffer: 128KiB\n",
     "key 'weight_buffer' = '32KiB': a split buffer needs 'activation_buffer' too"),
    ("weight_buffer: 0\nactivation_buffer: 64KiB\n", "key 'weight_buffer' = 0: must be positive"),
    ("weight_buffer: 32Kb\nactivation_buffer: 64KiB\n", "unknown size unit 'Kb'"),
    ("activation_buffer: 64KiB\n", "a split buffer needs 'weight_buffer' too"),
])
def test_bad_split_capacities_are_one_line_naming_the_key(tmp_path, text, message):
    with pytest.raises(HardwareConfigError) as err:
        load_hw(_file(tmp_path, text))
    assert message in str(err.value) and "\n" not in str(err.value)
    assert "missing required key 'buffer'" not in str(err.value)


def test_overrides_of_a_split_machine():
    hw = load_hw("nvdla-split")
    assert hw.with_overrides(weight_buffer="16KiB").buffers == (("weights", 16384),
                                                                ("activations", 65536))
    assert hw.with_overrides(buffer="256KiB").buffers == (("weights", 131072),
                                                          ("activations", 131072))
    uneven = hw.with_overrides(weight_buffer="16KiB").with_overrides(buffer="100KiB")
    assert uneven.buffers == (("weights", 20480), ("activations", 81920))  # 1:4 kept
    both = hw.with_overrides(buffer="96KiB", weight_buffer="32KiB")
    assert both.buffers == (("weights", 32768), ("activations", 65536))
    assert hw.with_overrides() == hw


def test_a_shared_machine_splits_with_both_capacities():
    hw = load_hw("edge-npu", {"weight_buffer": "64KiB", "activation_buffer": "192KiB"})
    assert hw.buffer_bytes == 256 * 1024 and hw.is_split
    with pytest.raises(HardwareConfigError, match="a split buffer needs 'activation_buffer'"):
        load_hw("edge-npu", {"weight_buffer": "64KiB"})
    with pytest.raises(HardwareConfigError, match="override 'weight_buffer' = '1e54': outside"):
        load_hw("edge-npu", {"weight_buffer": "1e54", "activation_buffer": "1KiB"})

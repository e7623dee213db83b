"""Sweep specs: axis parsing, the product with include/exclude, and validation up front."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_dse.sweep.spec import (
    Point,
    SweepError,
    SweepSpec,
    expand,
    load_spec,
    parse_axis,
    validate_points,
)
from simulator.errors import InputError

KIB = 1024


def test_axis_ranges_lists_and_sizes():
    assert parse_axis("buffer", "64KiB..512KiB:x2") == [64 * KIB, 128 * KIB, 256 * KIB,
                                                        512 * KIB]
    assert parse_axis("seed", "0..4") == [0, 1, 2, 3, 4]
    assert parse_axis("budget", "100..400:150") == [100, 250, 400]
    assert parse_axis("scheme", "lbdf, brr") == ["lbdf", "brr"]
    assert parse_axis("buffer", ["128KiB", 4096, "1MiB"]) == [128 * KIB, 4096, 1024 * KIB]
    assert parse_axis("objectives", "dram,mbu") == ["dram,mbu"]
    assert parse_axis("dram_bandwidth", "8..32:x2") == [8, 16, 32]


@pytest.mark.parametrize("axis, text, message", [
    ("buffer", "12XB", "axis 'buffer'.*12XB"),
    ("seed", "4..0", "empty or endless range"),
    ("buffer", "64KiB..1MiB:x1", "empty or endless range"),
    ("seed", "a..b", "not an integer"),
])
def test_bad_axis_values_are_quoted(axis, text, message):
    with pytest.raises(InputError, match=message):
        parse_axis(axis, text)


def test_product_with_exclude_and_include_like_a_matrix():
    spec = SweepSpec(axes={"models": "squeezenet1_0,resnet18", "buffers": "64KiB,128KiB",
                           "schemes": "lbdf,brr", "seeds": "0..1", "budget": 20},
                     exclude=[{"model": "resnet18", "scheme": "brr"},
                              {"buffer": "128KiB", "seed": 1}],
                     include=[{"scheme": "lbl"}, {"model": "resnet18", "scheme": "brr",
                                                  "buffer": "1MiB", "seed": 7}])
    points = expand(spec)
    searched = [p for p in points if p.scheme != "lbl"]
    # 2 models x 2 buffers x 2 schemes x 2 seeds = 16; resnet18+brr (4) removed; of the 12
    # left, those at 128 KiB with seed 1 (3) removed: 9.
    assert len(searched) == 9 + 1
    assert not any(p.model == "resnet18" and p.scheme == "brr" and p.seed != 7
                   for p in searched)
    assert not any(dict(p.overrides)["buffer"] == 128 * KIB and p.seed == 1 for p in searched)
    extra = [p for p in searched if p.seed == 7]
    assert extra == [Point("resnet18", "edge-npu", "brr", "auto", "random", "dram", 20, 7,
                           overrides=(("buffer", 1024 * KIB),), graph_stages="fuse")]
    # lbl has nothing to search: one point per model and buffer, seeds and searches dropped
    lbl = [p for p in points if p.scheme == "lbl"]
    assert len(lbl) == 4 and all(p.search is None and p.seed is None for p in lbl)
    assert len(set(points)) == len(points)


def test_defaults_and_hardware_axes():
    (p,) = expand(SweepSpec(axes={"model": "squeezenet1_0", "macs_per_cycle": 512}))
    assert (p.hw, p.scheme, p.search, p.repair, p.objectives, p.budget, p.seed) == \
        ("edge-npu", "lbdf", "auto", "random", "dram", 2000, 0)
    assert p.overrides == (("macs_per_cycle", 512),)


def test_spec_file_round_trip(tmp_path: Path):
    path = tmp_path / "small.yaml"
    path.write_text("axes:\n  models: [squeezenet1_0]\n  buffers: 64KiB..256KiB:x2\n"
                    "  seeds: 0..1\nexclude:\n  - {seed: 1, buffer: 64KiB}\n")
    spec = load_spec(path)
    assert spec.name == "small" and len(expand(spec)) == 5


@pytest.mark.parametrize("text, message", [
    ("axes: {models: [x], bufer: 1KiB}", "unknown axis 'bufer' \\(did you mean 'buffer'\\?\\)"),
    ("axes: {models: [x]}\nworkers: 3", "workers"),
    ("axes: [1, 2]", "axes"),
    ("axes: {buffers: 1KiB}", "needs a 'model' axis"),
    ("axes: {models: [x]\n", "malformed YAML"),
])
def test_bad_spec_files(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        load_spec(path)


def test_validation_names_every_bad_value():
    points = expand(SweepSpec(axes={
        "models": "squeezenet1_0,resnet5O,missing.onnx", "buffer": "64KiB",
        "search": "ls,annealing", "repair": "random,oracle", "dram_bandwidth": -1}))
    with pytest.raises(SweepError) as err:
        validate_points(points)
    lines = err.value.problems
    assert str(err.value).startswith("5 problems in the sweep: ")
    assert any("unknown model 'resnet5O'" in line and "resnet50" in line for line in lines)
    assert any("missing.onnx" in line for line in lines)
    assert any("'annealing'" in line for line in lines)
    assert any("'oracle'" in line for line in lines)
    assert any("dram_bandwidth" in line for line in lines)
    assert len(lines) == 5


def test_any_registered_search_name_is_accepted():
    from search.registry import SEARCHES

    points = expand(SweepSpec(axes={"model": "squeezenet1_0", "search": list(SEARCHES.names())}))
    validate_points(points)
    assert {p.search for p in points} == set(SEARCHES.names())


@pytest.mark.parametrize("argv, message", [
    (["--models", "squeezenet1_0", "--bufers", "1KiB"], "unrecognized arguments"),
    (["--models", "squeezenet1_0", "--axis", "bufer=1KiB"], "unknown axis 'bufer'"),
    (["--models", "squeezenet1_0", "--buffers", "64QiB"], "axis 'buffer'.*64QiB"),
    (["--models", "resnet5O"], "unknown model 'resnet5O'"),
    (["--models", "squeezenet1_0", "--schemes", "lbdff"], "unknown scheme 'lbdff'"),
    (["--models", "squeezenet1_0", "--workers", "0"], "--workers must be positive"),
])
def test_cli_bad_input_exits_2_with_one_line_and_starts_nothing(cli, tmp_path, argv, message):
    import re

    store = tmp_path / "s.sqlite"
    code, out, err = cli("sweep", *argv, "--store", str(store))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and re.search(message, err)
    assert not store.exists()


def test_cli_export_needs_a_store(cli, tmp_path):
    code, _, err = cli("sweep", "export")
    assert code == 2 and "needs a STORE" in err
    code, _, err = cli("sweep", "export", str(tmp_path / "none.sqlite"))
    assert code == 2 and "no sweep store" in err


def test_sweep_help_shows_both_forms(cli):
    code, out, _ = cli("sweep", "--help")
    assert code == 0
    assert "fusion-dse sweep [SPEC.yaml]" in out and "fusion-dse sweep export STORE" in out


def test_dry_run_counts_and_estimates_without_writing(cli, tmp_path):
    store = tmp_path / "d.sqlite"
    code, out, err = cli("sweep", "--models", "squeezenet1_0", "--budget", "20", "--seeds",
                         "0..3", "--schemes", "lbdf,lbl", "--store", str(store), "--dry-run",
                         "--workers", "2")
    assert code == 0, err
    assert "5 points, 0 already in" in out and "5 to run" in out and "2 timed point(s)" in out
    assert not store.exists()

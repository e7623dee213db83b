"""``fusion-dse train-gnn``: argument checking, and one end-to-end run (slow)."""

from __future__ import annotations

import json

import pytest

from fusion_dse.cli_gnn import parse_group_counts
from simulator.errors import InputError


@pytest.mark.parametrize("argv, message", [
    (["--scheme", "lbdf", "--epochs", "0"], "--epochs must be positive"),
    (["--scheme", "lbdf", "--threads", "-1"], "--threads must be positive"),
    (["--scheme", "lbdf", "--samples-per-network", "5x"], "expected N or NAME=N"),
    (["--scheme", "brr", "--samples-per-network", "efficientnet_b0=5"],
     "not a brr training network"),
    (["--scheme", "lbl"], "invalid choice"),
    ([], "--scheme"),
])
def test_bad_arguments_exit_2_with_one_line(cli, argv, message):
    code, out, err = cli("train-gnn", *argv)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


def test_group_counts():
    assert parse_group_counts(None, "lbdf") is None
    assert parse_group_counts("7", "brr") == dict.fromkeys(
        ["vgg16", "squeezenet1_0", "squeezenet1_1", "mobilenet_v2", "resnet18", "resnet101"], 7)
    assert parse_group_counts("vgg16=3, resnet18=0", "lbdf") == {"vgg16": 3, "resnet18": 0}
    with pytest.raises(InputError):
        parse_group_counts("vgg16=", "lbdf")


@pytest.mark.slow
def test_a_tiny_run_writes_checkpoint_tables_and_plot(cli, tmp_path):
    out = tmp_path / "gnn"
    code, text, err = cli("train-gnn", "--scheme", "brr", "--epochs", "2", "--out", str(out),
                          "--samples-per-network", "25", "--held-out-groups", "15", "-q")
    assert code == 0, err
    assert "test split" in text and "held-out resnet152" in text and "total" in text
    names = {p.name for p in out.iterdir()}
    assert names == {"brr.pt", "brr.json", "brr-dataset.csv", "brr-dataset.md",
                     "brr-held-out-dataset.csv", "brr-held-out-dataset.md", "validity.png"}
    meta = json.loads((out / "brr.json").read_text())
    assert meta["dataset"]["groups"] == 6 * 25 and meta["training"]["epochs"] == 2
    from explain.checkpoint import load_checkpoint

    assert load_checkpoint(out / "brr.pt", "brr").scheme == "brr"


@pytest.mark.parametrize("argv, message", [
    (["--explainer", "rg", "--scheme", "lbdf", "--epochs", "0"], "--epochs must be positive"),
    (["--explainer", "pg", "--scheme", "brr", "--samples-per-network", "-2"],
     "--samples-per-network must be positive"),
    (["--explainer", "rg", "--scheme", "lbdf", "--held-out-per-network", "-1"],
     "--held-out-per-network must be >= 0"),
    (["--explainer", "gnne", "--scheme", "lbdf"], "invalid choice"),
    (["--scheme", "lbdf"], "--explainer"),
])
def test_train_explainer_bad_arguments_exit_2_with_one_line(cli, argv, message):
    code, out, err = cli("train-explainer", *argv)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize("explainer", ["pg", "rg"])
def test_train_explainer_writes_parameters_that_the_repair_loads(cli, tmp_path, explainer):
    out = tmp_path / f"{explainer}.pt"
    code, text, err = cli("train-explainer", "--explainer", explainer, "--scheme", "lbdf",
                          "--epochs", "1", "--samples-per-network", "3",
                          "--held-out-per-network", "3", "--out", str(out))
    assert code == 0, err
    assert "held-out rectify rate (top 4 edges alone)" in text and str(out) in text
    from explain.explainers import PgExplainerGET
    from explain.rg_explainer import RgExplainerGET

    get = (PgExplainerGET if explainer == "pg" else RgExplainerGET)(checkpoint=out)
    assert get.supports("lbdf") and not get.supports("lbl")
    get._explainer("lbdf", "none") if explainer == "pg" else get._policy("lbdf", "none")

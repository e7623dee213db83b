"""``--input-shape 1,3,H,W --bind H=..,W=..`` on evaluate and optimize, ONNX dynamic inputs,
and bad bindings (one line, exit status 2)."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import warnings

import pytest
import torch
from torch import nn


def _totals(cli, *argv: str) -> dict:
    code, out, err = cli("evaluate", *argv, "--scheme", "lbl", "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_evaluate_with_bound_symbols_equals_the_fixed_shape(cli):
    bound = _totals(cli, "squeezenet1_1", "--input-shape", "1,3,H,W", "--bind", "H=96,W=160")
    assert bound == _totals(cli, "squeezenet1_1", "--input-shape", "1,3,96,160")


@pytest.mark.slow
def test_optimize_with_bound_symbols_equals_the_fixed_shape(cli, tmp_path):
    common = ("--search", "rs", "--budget", "20", "--no-optimum", "--quiet")
    code, _, err = cli("optimize", "squeezenet1_1", "--input-shape", "1,3,H,W", "--bind",
                       "H=160,W=128", "--out", str(tmp_path / "bound"), *common)
    assert code == 0, err
    code, _, err = cli("optimize", "squeezenet1_1", "--input-shape", "1,3,160,128", "--out",
                       str(tmp_path / "fixed"), *common)
    assert code == 0, err
    bound, fixed = ((tmp_path / d / "plan.json").read_text() for d in ("bound", "fixed"))
    assert json.loads(bound) == json.loads(fixed)


@pytest.mark.parametrize("argv, message", [
    (["--input-shape", "1,3,H,W"], "--input-shape 1,3,H,W names symbols H, W; give their "
                                   "values with --bind"),
    (["--input-shape", "1,3,H,W", "--bind", "H=100"], "symbol 'W' of 'squeezenet1_1' is not "
                                                      "bound"),
    (["--input-shape", "1,3,H,W", "--bind", "H=100,W=100,Q=2"], "symbol 'Q' is not a "
                                                                "dimension"),
    (["--input-shape", "1,3,H,W", "--bind", "H=0,W=100"], "--bind H=0: a dimension must be "
                                                          "a positive integer"),
    (["--input-shape", "1,3,H,W", "--bind", "H=1.5,W=100"], "--bind H=1.5: a dimension"),
    (["--input-shape", "1,3,H,W", "--bind", "H,W"], "--bind item 'H' is not NAME=VALUE"),
    (["--input-shape", "1,3,H,W", "--bind", "H=16,W=64"], "H=16,W=64 makes dimension 2 of op "
                                                          "'features."),
    (["--bind", "H=224"], "model 'squeezenet1_1' has no symbolic dimensions; name them in the "
                          "input shape"),
    (["--input-shape", "1,C,H,W", "--bind", "C=4,H=64,W=64"], "op 'features.0' (conv conv): "
                                                              "its input channels C"),
])
def test_bad_bindings_are_one_line_and_exit_2(cli, argv, message):
    for command in ("evaluate", "optimize"):
        extra = ("--out", "unused-out") if command == "optimize" else ()
        code, out, err = cli(command, "squeezenet1_1", *argv, *extra)
        assert code == 2 and out == ""
        assert err.startswith("fusion-dse: error: ") and err.count("\n") == 1
        assert message in err, err


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                                  nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU())
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(8, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


@pytest.fixture
def dynamic_onnx(tmp_path):
    """A small network exported with dynamic height and width (dim_param names)."""
    path = tmp_path / "net.onnx"
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(_Net().eval(), (torch.randn(1, 3, 32, 32),), str(path),
                              dynamo=False, input_names=["x"],
                              dynamic_axes={"x": {2: "height", 3: "width"}})
        finally:
            logging.disable(logging.NOTSET)
    return str(path)


def test_an_onnx_dynamic_input_is_bound_by_its_dim_param_names(cli, dynamic_onnx):
    bound = _totals(cli, dynamic_onnx, "--bind", "height=96,width=40")
    assert bound == _totals(cli, dynamic_onnx, "--input-shape", "1,3,96,40")
    renamed = _totals(cli, dynamic_onnx, "--input-shape", "1,3,H,W", "--bind", "H=96,W=40")
    assert renamed == bound
    code, _, err = cli("evaluate", dynamic_onnx)
    assert code == 2 and "has symbolic dimensions (1, 3, height, width)" in err
    assert "--bind height=..,width=.." in err
    code, _, err = cli("evaluate", dynamic_onnx, "--bind", "height=96")
    assert code == 2 and "symbol 'width' of 'net' is not bound" in err


def test_help_documents_the_bind_option(cli):
    for command in ("evaluate", "optimize", "simulate"):
        code, out, _ = cli(command, "--help")
        assert code == 0 and "--bind SYM=V,..." in out and "1,3,H,W" in out

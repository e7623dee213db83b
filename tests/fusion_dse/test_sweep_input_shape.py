"""The sweep's ``input_shape`` axis binds one symbolic import per model instead of
re-importing the model at every point."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings

import pytest
import torch
from torch import nn

from fusion_dse.sweep import point as point_module
from fusion_dse.sweep.point import model_graph, run_point
from fusion_dse.sweep.spec import Point
from simulator.workload import rdp
from simulator.workload.loader import load


def _point(model: str, shape: str | None, scheme: str = "lbl") -> Point:
    return Point(model, "edge-npu", scheme, None, None, None, None, None, input_shape=shape)


def _export(path, dynamic: bool) -> None:
    net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                        nn.MaxPool2d(3, stride=2, ceil_mode=True), nn.Conv2d(8, 4, 1)).eval()
    axes = {"x": {2: "height", 3: "width"}} if dynamic else None
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(net, (torch.randn(1, 3, 32, 32),), str(path), dynamo=False,
                              input_names=["x"], dynamic_axes=axes)
        finally:
            logging.disable(logging.NOTSET)


@pytest.fixture(autouse=True)
def _fresh_templates():
    point_module._TEMPLATES.clear()
    yield
    point_module._TEMPLATES.clear()


def test_points_of_an_onnx_model_bind_one_import(tmp_path, monkeypatch):
    path = tmp_path / "net.onnx"
    _export(path, dynamic=True)
    imports = []
    real = rdp.load_symbolic
    monkeypatch.setattr(rdp, "load_symbolic", lambda *a, **k: imports.append(a) or real(*a, **k))
    shapes = ("1,3,64,64", "1,3,97,131", "1,3,300,200")
    graphs = [model_graph(_point(str(path), s)) for s in shapes]
    assert len(imports) == 1  # one symbolic import serves every shape
    for graph, shape in zip(graphs, shapes, strict=True):
        assert graph == load(str(path), shape)  # what the point loaded before
    row = run_point(_point(str(path), shapes[1]), "k")
    assert row["status"] == "done" and len(imports) == 1


def test_models_that_cannot_take_symbols_load_at_each_shape(tmp_path):
    static = tmp_path / "static.onnx"
    _export(static, dynamic=False)
    assert model_graph(_point(str(static), "1,3,32,32")) == str(static)
    row = run_point(_point(str(static), "1,3,64,64"), "k")  # the static input refuses 64x64
    assert row["status"] == "failed" and "does not match input 'x'" in row["error"]
    assert model_graph(_point("resnet18@96", "1,3,64,64")) == "resnet18@96"
    assert model_graph(_point("resnet18", None)) == "resnet18"


def test_a_zoo_point_binds_to_the_zoo_graph_at_its_shape():
    graph = model_graph(_point("squeezenet1_1", "1,3,160,96"))
    assert not isinstance(graph, str)
    assert graph == load("squeezenet1_1", "1,3,160,96")
    row = run_point(_point("squeezenet1_1", "1,3,16,64"), "k")  # a dimension vanishes
    assert row["status"] == "failed" and "BindingError" in row["error"]
    assert "makes dimension 2 of op" in row["error"]


def test_an_input_shape_axis_keeps_each_shape_whole():
    """'1,3,128,128' is one shape, not four values (the spec's axis was split at its commas
    into the points '1', '3', '128' and '128'); shapes are list items or ';'-separated."""
    from fusion_dse.sweep.spec import InputError, SweepSpec, expand, spec_from_flags

    spec = SweepSpec(name="s", axes={"models": "resnet18",
                                     "input_shape": ["1,3,64,64", [1, 3, 96, 96]]})
    assert [p.input_shape for p in expand(spec)] == ["1,3,64,64", "1,3,96,96"]
    flags = spec_from_flags("s", {"models": "resnet18", "input_shape": "1,3,64,64; 1,3,H,W"})
    assert [p.input_shape for p in expand(flags)] == ["1,3,64,64", "1,3,H,W"]
    with pytest.raises(InputError, match="'1,3,6a4' is not a shape"):
        expand(spec_from_flags("s", {"models": "resnet18", "input_shape": "1,3,6a4"}))

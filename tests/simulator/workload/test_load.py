"""`load`: zoo names with resolutions, graph JSON, module:callable, and unknown names."""

from __future__ import annotations

import sys
import textwrap

import pytest

from simulator.workload.errors import UnknownModelError
from simulator.workload.graph import ComputeGraph
from simulator.workload.loader import load, resolve_zoo_name


def test_zoo_names_are_forgiving_about_case_and_separators():
    assert resolve_zoo_name("ResNet-50") == "resnet50"
    assert resolve_zoo_name("mobilenetv2") == "mobilenet_v2"
    assert resolve_zoo_name("resnet51") is None


def test_resolution_suffix_overrides_height_and_width():
    g = load("resnet18@160")
    assert g.input_shapes == ((1, 3, 160, 160),)
    assert load("resnet18@160x128").input_shapes == ((1, 3, 160, 128),)
    assert load("resnet18", "2,3,64,64").input_shapes == ((2, 3, 64, 64),)


def test_unknown_model_suggests_close_names():
    with pytest.raises(UnknownModelError, match="did you mean resnet50"):
        load("resnet5O")
    with pytest.raises(UnknownModelError, match="zoo networks: vgg16"):
        load("alexnet")


def test_graph_json_file_loads(tmp_path):
    g = load("squeezenet1_1@64")
    path = tmp_path / "g.json"
    path.write_text(g.to_json())
    assert load(str(path)) == g


def test_module_callable_from_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "my_net.py").write_text(textwrap.dedent("""
        from torch import nn
        def build():
            return nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8*6*6, 2))
        def broken():
            raise RuntimeError("no weights here")
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    g = load("my_net:build", "1,3,8,8")
    assert isinstance(g, ComputeGraph) and len(g) == 4
    with pytest.raises(UnknownModelError, match="no attribute 'nope'"):
        load("my_net:nope")
    with pytest.raises(UnknownModelError, match="cannot import module 'not_a_module'"):
        load("not_a_module:build")
    with pytest.raises(UnknownModelError, match="failed: RuntimeError: no weights here"):
        load("my_net:broken")


def test_module_callable_may_build_its_graph_in_the_ir():
    """A factory returning a `ComputeGraph` (the synthetic wide graphs) is taken as it is; an
    input shape other than its own is refused in one line, its own is accepted."""
    from simulator.workload.errors import InputShapeError
    from simulator.workload.synthetic import hrnet_like

    g = load("simulator.workload.synthetic:hrnet_like")
    assert g == hrnet_like() and len(g) == 225
    assert load("simulator.workload.synthetic:hrnet_like", "1,3,224,224") == g
    with pytest.raises(InputShapeError, match="builds its graph in the IR at input shape "
                                              "1,3,224,224"):
        load("simulator.workload.synthetic:hrnet_like", "1,3,256,256")

"""timm models (random weights, nothing downloaded) through the torch.export importer, each
executed by the IR executor to the module's output (relative error <= 1e-4) with the module's
parameter count once folded BatchNorms are reconciled, and the graph JSON round trip; the
models the issue found crashing or refused (F.batch_norm of BatchNormAct2d, F.conv2d without
a padding argument, a shape-derived F.pad, TF-"same" padding, shifted windows,
--allow-opaque). benchmarks/timm_coverage.py runs the fixed list of 166."""

from __future__ import annotations

import warnings

import pytest
import torch

from simulator.workload.loader import import_torchvision

import_torchvision()
timm = pytest.importorskip("timm")

from simulator.workload.execute import execute  # noqa: E402
from simulator.workload.export_import import from_export_with_params  # noqa: E402
from simulator.workload.graph import ComputeGraph  # noqa: E402

pytestmark = pytest.mark.xdist_group(name="timm_models")

SHAPE = (1, 3, 224, 224)


def _check(name: str, *, allow_opaque: bool = False, params_equal: bool = True) -> None:
    module = timm.create_model(name, pretrained=False).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph, params, result = from_export_with_params(module, SHAPE, name=name,
                                                        allow_opaque=allow_opaque)
    assert not result.opaque
    x = torch.randn(SHAPE, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = module(x)
    out = execute(graph, params, x)[0]
    assert float((out - ref).abs().max() / ref.abs().max().clamp_min(1e-30)) <= 1e-4
    module_params = sum(p.numel() for p in module.parameters())
    if params_equal:
        assert graph.total_weights == module_params - result.folded_params
    assert ComputeGraph.from_json(graph.to_json()) == graph


def test_mobilenetv3_batchnormact():
    _check("mobilenetv3_small_050")


@pytest.mark.slow
@pytest.mark.parametrize("name, params_equal", [
    ("tf_efficientnet_b0", True),  # TF-"same" padding computed from the input's shape
    ("nf_regnet_b0", False),  # F.conv2d without padding; weight standardisation's gains
    ("resnetblur18", False),  # reflect pad, a blur filter buffer counted as weights
    ("davit_tiny", True),  # F.pad by a shape-derived amount
    ("swin_tiny_patch4_window7_224", False),  # roll, relative position bias per head
    ("mobilevit_xxs", True),
])
def test_models_the_issue_found_refused(name, params_equal):
    _check(name, params_equal=params_equal)


@pytest.mark.slow
def test_allow_opaque_does_not_crash():
    _check("tresnet_m", allow_opaque=True, params_equal=False)

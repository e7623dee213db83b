"""The coverage table is read from the converters and agrees with what they do; the committed
docs/importers.md is the generated one; survey_torch names what a model needs."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
from torch import nn

from simulator.workload import coverage
from simulator.workload import torch_import as ti
from simulator.workload.coverage import (
    DROPPED,
    MEASURED_HEADING,
    CoverageError,
    markdown,
    onnx_entries,
    survey_torch,
    torch_entries,
)
from simulator.workload.errors import UnsupportedOpError
from simulator.workload.torch_import import from_torch

DOC = Path(__file__).resolve().parents[3] / "docs" / "importers.md"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_committed_doc_is_the_generated_one_then_the_measured_part():
    text = DOC.read_text()
    generated = markdown()
    assert text.startswith(generated), ("docs/importers.md is stale: run python -m "
                                        "simulator.workload.coverage --markdown (see its head)")
    assert text[len(generated):].lstrip("\n").startswith(MEASURED_HEADING)


def test_cli_prints_the_markdown(capsys):
    assert coverage.main(["--markdown"]) == 0
    assert capsys.readouterr().out == markdown()


def _constructible_modules() -> list[tuple[type, str, str]]:
    """(class, kind, op_type) of the table's module entries buildable without arguments."""
    found = []
    for e in torch_entries():
        cls = getattr(nn, e.name.removeprefix("nn."), None) if e.name.startswith("nn.") else None
        if e.form != "module" or cls is None or "/" in e.op_type:
            continue
        params = inspect.signature(cls.__init__).parameters.values()
        if all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               or p.name == "self" for p in params):
            found.append((cls, e.kind, e.op_type))
    return found


def test_every_argument_free_module_in_the_table_imports_as_listed():
    modules = _constructible_modules()
    assert len(modules) >= 30  # every activation and dropout, Identity, Softmax2d, ...
    for cls, kind, op_type in modules:
        class Net(nn.Module):
            def __init__(self, body: nn.Module) -> None:
                super().__init__()
                self.body = body

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.body(x + 1.0)

        shape = {nn.Dropout1d: (1, 4, 5), nn.Dropout3d: (1, 4, 2, 5, 5)}.get(cls, (1, 4, 5, 5))
        body = nn.Upsample(scale_factor=2) if cls is nn.Upsample else cls()
        graph = from_torch(Net(body), shape)
        got = [(op.kind.value, op.op_type) for op in graph][1:]
        assert got == ([] if kind == DROPPED else [(kind, op_type)]), cls.__name__


def test_names_in_the_table_exist():
    for e in torch_entries():
        if e.form == "method":
            assert hasattr(torch.Tensor, e.name.removeprefix("Tensor.")), e.name
        elif e.form == "module" and e.name.startswith("nn."):
            assert isinstance(getattr(nn, e.name[3:]), type), e.name
    ops = {e.name for e in onnx_entries() if e.form == "op"}
    assert {"Conv", "Celu", "Shrink", "ThresholdedRelu", "Softsign", "Softmax"} <= ops


def test_a_handler_the_table_does_not_describe_is_an_error(monkeypatch):
    def _new(self, node, mod):  # a converter added without a coverage description
        return None

    monkeypatch.setattr(ti, "_MODULE_HANDLERS", [*ti._MODULE_HANDLERS, (nn.Bilinear, _new)])
    with pytest.raises(CoverageError, match="_new"):
        torch_entries()


@pytest.mark.parametrize(("module", "name", "shape"), [
    (nn.Softmin(1), "Softmin", (1, 4, 5, 5)), (nn.GLU(1), "GLU", (1, 4, 5, 5)),
    (nn.InstanceNorm2d(4), "InstanceNorm2d", (4, 5, 5)),  # unbatched: channels first
    (nn.ConvTranspose2d(4, 4, 2), "ConvTranspose2d", (1, 4, 5, 5)),
])
def test_modules_the_table_lists_as_refused_are_refused_by_name(module, name, shape):
    assert any(k.startswith(f"nn.{name}") for k in coverage.REFUSED_TORCH)
    with pytest.raises(UnsupportedOpError, match=f"unsupported op {name} at node"):
        from_torch(nn.Sequential(nn.ReLU(), module), shape)


def test_survey_names_every_refused_op_and_counts_the_rest():
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, padding=1)
            self.softmin = nn.Softmin(1)
            self.norm = nn.GroupNorm(2, 4)
            self.up = nn.ConvTranspose2d(4, 4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.norm(self.softmin(nn.functional.gelu(self.conv(x))))
            return self.up(y).flatten(1)

    survey = survey_torch(Block(), (1, 4, 5, 5))
    assert not survey.imports and survey.refused == ("Softmin", "ConvTranspose2d")
    assert [op.kind.value for op in survey.graph] == ["conv", "eltwise_unary", "opaque",
                                                      "norm", "opaque", "reshape"]
    clean = survey_torch(nn.Sequential(nn.Conv2d(3, 4, 3), nn.Dropout(), nn.Mish()),
                         (1, 3, 8, 8))
    assert clean.imports and clean.refused == () and len(clean.graph) == 2


def test_survey_reports_a_module_torch_fx_cannot_trace():
    class Branchy(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x if x.sum() > 0 else -x

    survey = survey_torch(Branchy(), (1, 3, 4, 4))
    assert not survey.imports and survey.graph is None and "cannot trace" in survey.error

"""One question, one number: the same optimize gives the same bytes idle and with every core
saturated (the exact solver stops on counted work, never on the clock), and no run writes a plan
worse than one it computed."""

from __future__ import annotations

import json
import multiprocessing as mp
import os

import pytest

from fusion_dse import optimize
from fusion_dse.optimization import plan_document
from fusion_dse.pipeline import _PROVEN
from fusion_dse.sweep.point import without_timing

BUSY = max(2, os.cpu_count() or 2)


def _answer(**kwargs) -> str:
    _PROVEN.clear()  # solve anew, as a fresh process would
    result = optimize(**kwargs)
    doc = {"plan": plan_document(result), "summary": result.summary.to_dict()}
    return json.dumps(without_timing(doc), sort_keys=True, default=str)


def _spin() -> None:
    while True:
        pass


# MobileNetV2 BRR at 128 KiB needs 326 sets costed to prove its optimum: a cap of 120 makes
# auto take the capped path (the best of the capped solve and the baselines, then local search).
RUNS = {
    "auto, capped": dict(model="mobilenet_v2", scheme="brr", search="auto", budget=40,
                         exact_max_costed=120, overrides={"buffer": "128KiB"}),
    "exact, capped": dict(model="mobilenet_v2", scheme="brr", search="exact",
                          exact_max_costed=120, overrides={"buffer": "128KiB"}),
    "auto, proven": dict(model="squeezenet1_1", scheme="brr", search="auto",
                         overrides={"buffer": "256KiB"}),
}


def test_the_same_bytes_idle_and_with_every_core_saturated():
    idle = {name: _answer(**kwargs) for name, kwargs in RUNS.items()}
    spinners = [mp.get_context("fork").Process(target=_spin, daemon=True)
                for _ in range(BUSY)]
    for proc in spinners:
        proc.start()
    try:
        loaded = {name: _answer(**kwargs) for name, kwargs in RUNS.items()}
    finally:
        for proc in spinners:
            proc.terminate()
            proc.join()
    for name in RUNS:
        assert loaded[name] == idle[name], name
    capped = json.loads(idle["auto, capped"])["summary"]
    assert capped["search_report"]["auto_path"] == "ls"
    assert capped["optimum"]["reproducible"] is True
    assert "costing cap (120 sets)" in capped["optimum"]["cap_reason"]
    assert json.loads(idle["auto, proven"])["summary"]["search_report"]["auto_path"] == "exact"


def _references(summary: dict) -> dict[str, int]:
    refs = {name: b["dram_bytes"] for name, b in summary["baselines"].items()
            if b["groups"] is not None}  # the lower bound has no plan
    if summary["optimum"].get("dram_bytes") is not None:
        refs["optimum"] = summary["optimum"]["dram_bytes"]
    return refs


def _check_never_worse(model: str, scheme: str, buffer: str, **kwargs) -> None:
    result = optimize(model, scheme=scheme, overrides={"buffer": buffer}, **kwargs)
    s = result.summary.to_dict()
    written = plan_document(result)["totals"]["dram_bytes"]
    assert written == s["best"]["dram_bytes"] == result.cost.dram_bytes
    worse = {k: v for k, v in _references(s).items() if v < written}
    assert not worse, f"{model} {scheme} {buffer}: plan {written:,} B, better known {worse}"


@pytest.mark.parametrize(("model", "scheme", "buffer", "search"), [
    ("mobilenet_v2", "lbdf", "64KiB", "auto"),
    ("resnet18", "brr", "256KiB", "nsga2"),
    ("squeezenet1_0", "brr", "2MiB", "rs"),
])
def test_no_written_plan_is_worse_than_a_reference_of_its_own_summary(model, scheme, buffer,
                                                                       search):
    _check_never_worse(model, scheme, buffer, search=search, budget=30, seed=1)


def _zoo_cases() -> list[tuple[str, str, str]]:
    from simulator.workload.zoo import zoo_names

    buffers = ("64KiB", "256KiB", "2MiB")
    return [(name, scheme, buffers[(k + j) % 3]) for k, name in enumerate(zoo_names())
            for j, scheme in enumerate(("lbdf", "brr"))]


@pytest.mark.slow
@pytest.mark.parametrize(("model", "scheme", "buffer"), _zoo_cases())
def test_no_written_plan_is_worse_than_a_reference_on_the_zoo(model, scheme, buffer):
    """Every zoo network (transformers included), LBDF and BRR, the three buffers in turn: the
    default run, its exact solver capped low (200 sets costed) so that the capped path, local
    search and the baselines all take part, never writes a plan worse than a reference of its
    own summary. A network that cannot run at all at the buffer is refused, not written."""
    from simulator.errors import InputError

    try:
        _check_never_worse(model, scheme, buffer, search="auto", budget=20,
                           exact_max_costed=200)
    except InputError as err:
        assert "cannot run" in str(err)

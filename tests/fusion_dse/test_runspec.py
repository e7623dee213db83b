"""`RunSpec` holds every default and check of a run: the command line, `optimize`, compare
and sweep specs read the same defaults, and the library refuses what the command line does."""

from __future__ import annotations

import inspect
from dataclasses import fields

import pytest

from fusion_dse.cli import build_parser
from fusion_dse.optimization import optimize
from fusion_dse.runspec import RunSpec, check_budget, check_seed, run_defaults
from simulator.errors import InputError
from simulator.limits import MAX_BUDGET, MAX_SEED
from simulator.scheme import Scheme

CLI_FIELDS = {"hw": "hw", "scheme": "scheme", "search": "search", "repair": "repair",
              "budget": "budget", "seed": "seed", "objectives": "objectives",
              "substitution": "substitution", "graph_stages": "graph_stages"}


def test_the_command_line_shows_the_run_defaults():
    defaults = run_defaults()
    args = build_parser().parse_args(["optimize"])
    for name, dest in CLI_FIELDS.items():
        assert getattr(args, dest) == defaults[f"run.{name}"], name
    compare = build_parser().parse_args(["compare", "resnet18"])
    assert (compare.hw, compare.search, compare.repair) == (
        RunSpec.hw, RunSpec.search, RunSpec.repair)


def test_optimize_takes_the_run_defaults():
    params = inspect.signature(optimize).parameters
    for f in fields(RunSpec):
        if f.name in params and f.name != "model":
            assert params[f.name].default == f.default, f.name


def test_sweep_points_take_the_run_defaults():
    from fusion_dse.sweep.spec import _DEFAULTS

    assert _DEFAULTS["budget"] == RunSpec.budget and _DEFAULTS["hw"] == RunSpec.hw
    assert _DEFAULTS["scheme"] == RunSpec.scheme and _DEFAULTS["objectives"] == "dram"


def test_checked_casts_once_and_refuses_before_loading():
    run = RunSpec("no_such_network", scheme="HYBRID", objectives="dram").checked()
    assert run.scheme is Scheme.HYBRID and run.objectives == ("dram",)
    with pytest.raises(InputError, match="over the limit"):
        RunSpec("no_such_network", budget=MAX_BUDGET + 1).checked()
    with pytest.raises(InputError, match="seed .* over the limit"):
        RunSpec("no_such_network", seed=MAX_SEED + 1).checked()


@pytest.mark.parametrize("value, message", [
    (-1, "seed must be a non-negative integer"), (True, "seed must be"),
    (MAX_SEED + 1, "is over the limit"),
])
def test_check_seed(value, message):
    with pytest.raises(InputError, match=message):
        check_seed(value)


def test_check_budget_names_the_setting_as_its_caller_does():
    assert check_budget(5) == 5
    with pytest.raises(InputError, match=r"^--budget 100,000,001 is over the limit"):
        check_budget(MAX_BUDGET + 1, "--budget")


def test_the_library_refuses_a_budget_over_the_limit_as_the_command_line_does(cli, tmp_path):
    with pytest.raises(InputError, match="budget .* over the limit"):
        optimize("resnet18", budget=MAX_BUDGET + 1)
    code, _, err = cli("optimize", "resnet18", "--budget", str(MAX_BUDGET + 1), "--out",
                       str(tmp_path / "o"))
    assert code == 2 and "--budget 100,000,001 is over the limit of 100,000,000 plans" in err


def test_defaults_the_help_names_in_words_are_the_code_s():
    """Defaults ``cli.toml`` cannot read without torch are written in its help texts: held
    equal to the code here, so they cannot drift."""
    from explain.pretrain import DEFAULTS
    from explain.train import DEFAULT_EPOCHS
    from fusion_dse.cli_args import surface

    def help_of(command, flag):
        options = surface()["commands"][command]["options"]
        return next(o["help"] for o in options if flag in o.get("flags", []))

    assert f"(default: {DEFAULT_EPOCHS})" in help_of("train-gnn", "--epochs")
    trained = ", ".join(f"{name} {d['epochs']}" for name, d in DEFAULTS.items())
    assert f"(default: {trained})" in help_of("train-explainer", "--epochs")

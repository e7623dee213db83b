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


def _help_texts():
    """Every help text of ``cli.toml`` with where it is (shared sets and subcommands)."""
    from fusion_dse.cli_args import surface

    spec = surface()
    tables = [(f"sets.{name}", entry["options"]) for name, entry in spec["sets"].items()]
    tables += [(f"commands.{name}", entry["options"]) for name, entry in spec["commands"].items()]
    for where, options in tables:
        for option in options:
            if "help" in option:
                yield f"{where} {option.get('flags', option.get('name', option.get('use')))}", \
                    option["help"]


def test_no_help_text_writes_a_default_value():
    """A help text names a default by ``%(default)s`` or a ``{placeholder}`` the code fills
    (`fusion_dse.cli._defaults`), never by its value: what is left of a ``default:`` clause once
    those are taken out holds no number and no name a registry, a preset or the stages know."""
    import re

    from search.registry import EXPLAINERS, REPAIRS, SEARCHES
    from search.substitution.stages import SUBSTITUTIONS
    from simulator.hw import list_presets

    names = {*map(str, Scheme), *SEARCHES.names(), *REPAIRS.names(), *EXPLAINERS.names(),
             *SUBSTITUTIONS, *list_presets(), "fuse", "fission", "substitute"}
    found = []
    for where, text in _help_texts():
        for clause in re.findall(r"default:?\s([^)]*)", text):
            if _written(clause, names):
                found.append(f"{where}: {clause!r}")
    assert not found, "\n".join(found)


def _written(clause, names):
    """Whether a ``default:`` clause writes a value: one of its alternatives (split at
    commas, ``or`` and ``else``), placeholders taken out, starts with a number or a name."""
    import re

    bare = re.sub(r"%\(default\)s|\{[^}]*\}", "", clause.split(";")[0])
    for alternative in re.split(r",|\bor\b|\belse\b", bare):
        first = re.findall(r"[A-Za-z0-9_.-]+", alternative)[:1]
        if first and (first[0][0].isdigit() or first[0] in names):
            return True
    return False


@pytest.mark.parametrize("clause, written", [
    ("50)", True), ("pg 30, rg 10", True), ("the plan file's, else edge-npu", True),
    ("the zoo's, or 1,3,224,224", True), ("{explain.epochs}", False),
    ("the plan file's, else {run.hw}", False), ("%(default)s, int8", False),
    ("the random repair's split", False)])
def test_the_check_for_written_defaults_sees_what_it_looks_for(clause, written):
    assert _written(clause, {"edge-npu", "pg", "rg", "random"}) is written


def _parsed(*argv):
    return build_parser().parse_args(list(argv))


def test_every_subcommand_s_defaults_are_the_code_s():
    from explain import defaults as explain
    from explain.train import DEFAULT_EPOCHS
    from fusion_dse.runspec import DEFAULT_MODEL, CompareSpec
    from fusion_dse.sweep.cli import compare_spec

    assert _parsed("optimize").model == DEFAULT_MODEL
    assert compare_spec(_parsed("compare", "resnet18")) == CompareSpec("resnet18")
    explain_args = _parsed("explain", "resnet18", "--group", "1:2")
    assert (explain_args.explainer, explain_args.top, explain_args.scheme, explain_args.seed) \
        == (explain.EXPLAINER, explain.EXPLAIN_TOP, RunSpec.scheme, RunSpec.seed)
    rewrite = _parsed("rewrite", "resnet18", "--out", "x.json")
    assert (rewrite.stages, rewrite.substitution, rewrite.scheme, rewrite.seed) == (
        RunSpec.graph_stages, RunSpec.substitution, RunSpec.scheme, RunSpec.seed)
    trained = _parsed("train-explainer", "--explainer", "pg", "--scheme", "brr")
    assert (trained.held_out_per_network, trained.top) == (explain.PRETRAIN_HELD_OUT,
                                                          explain.PRETRAIN_TOP)
    assert DEFAULT_EPOCHS == explain.EPOCHS


def test_help_texts_show_the_code_s_defaults(capsys):
    from explain import defaults as explain

    def help_of(command):
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, "--help"])
        return " ".join(capsys.readouterr().out.split())

    assert f"training epochs (default: {explain.EPOCHS})" in help_of("train-gnn")
    trained = ", ".join(f"{name} {d['epochs']}" for name, d in explain.PRETRAIN.items())
    assert f"(default: {trained})" in help_of("train-explainer")
    sweep = help_of("sweep")
    assert f"(default: {RunSpec.budget})" in sweep and f"(default: {RunSpec.hw})" in sweep
    assert f"default: {explain.MAX_EDGES};" in help_of("optimize")


def test_optimize_takes_a_run_spec_as_its_keywords_make_it():
    spec = RunSpec("resnet18", search="ls", budget=5, overrides={"buffer": "64KiB"},
                   compute_optimum=False, graph_stages="none")
    by_spec = optimize(spec)
    by_keywords = optimize("resnet18", search="ls", budget=5, overrides={"buffer": "64KiB"},
                           compute_optimum=False, graph_stages="none")
    assert by_spec.plan == by_keywords.plan
    assert by_spec.summary.to_dict()["best"] == by_keywords.summary.to_dict()["best"]
    with pytest.raises(TypeError, match="budget besides it"):
        optimize(spec, budget=10)


def test_a_sweep_point_runs_the_run_spec_of_its_settings():
    from fusion_dse.sweep.spec import SweepSpec, expand

    searched, lbl = expand(SweepSpec(axes={"model": "resnet18", "scheme": "brr,lbl",
                                           "buffer": "64KiB", "seed": 3}))
    assert searched.run_spec() == RunSpec("resnet18", scheme="brr", seed=3, objectives="dram",
                                          overrides={"buffer": 65536})
    with pytest.raises(ValueError, match="nothing to search"):
        lbl.run_spec()


def test_compare_builds_its_sweep_from_a_compare_spec():
    from fusion_dse.runspec import CompareSpec
    from fusion_dse.sweep.cli import compare_name
    from fusion_dse.sweep.spec import SweepSpec, expand

    spec = CompareSpec("resnet18", buffers="64KiB,128KiB", schemes="lbdf,lbl")
    points = expand(SweepSpec(axes=spec.axes()))
    assert [(p.scheme, p.budget, p.graph_stages) for p in points] == [
        ("lbdf", spec.budget, "fuse"), ("lbl", None, "fuse")] * 2
    # the store of the default comparison keeps the name it had before CompareSpec
    assert compare_name(CompareSpec("resnet18")) == "compare-resnet18-edge-npu-f60b56"

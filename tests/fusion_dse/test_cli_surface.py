"""The command-line surface declared in ``fusion_dse/cli.toml`` and built by `cli_args`."""

from __future__ import annotations

import argparse

import pytest

from fusion_dse import cli_args
from fusion_dse.cli import build_parser
from search.registry import REPAIRS, SEARCHES
from simulator.hw import load_hw


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in parser._actions if flag in a.option_strings)


def test_every_declared_subcommand_is_built_with_its_code():
    commands = _subparsers(build_parser())
    assert list(commands) == list(cli_args.surface()["commands"])
    assert all(callable(p.get_default("run")) for p in commands.values())


def test_choices_come_from_the_registries_when_the_parser_is_built():
    optimize = _subparsers(build_parser())["optimize"]
    assert tuple(_option(optimize, "--search").choices) == SEARCHES.names()
    assert tuple(_option(optimize, "--repair").choices) == REPAIRS.names()
    assert _option(optimize, "--exact-time-limit").type is cli_args.time_limit


def test_shared_sets_give_every_user_the_same_options():
    commands = _subparsers(build_parser())
    hw_flags = [a.option_strings for a in commands["evaluate"]._actions
                if a.dest in cli_args.option_dests("hw-fields")]
    for name in ("optimize", "simulate", "explain"):
        assert [a.option_strings for a in commands[name]._actions
                if a.dest in cli_args.option_dests("hw-fields")] == hw_flags
    assert len(hw_flags) == 9


def test_the_hardware_options_name_fields_the_loader_accepts():
    args = argparse.Namespace(hw_set=[], **{
        dest: value for dest, value in zip(
            cli_args.option_dests("hw-fields"),
            (None, "64KiB", "192KiB", 2, 16, 100, "1GHz", 512, 64), strict=True)})
    overrides = cli_args.hw_overrides(args)
    hw = load_hw("edge-npu", overrides)
    assert hw.buffer_bytes == 256 * 1024 and hw.dtype_bytes == 2 and hw.clock_hz == 1e9
    assert hw.buffers == (("weights", 64 * 1024), ("activations", 192 * 1024))


def test_sweep_axes_are_read_by_dest_in_declared_order():
    assert cli_args.option_dests("sweep-axes") == (
        "axis_model", "axis_hw", "axis_buffer", "axis_scheme", "axis_search", "axis_repair",
        "axis_budget", "axis_seed", "axis_input_shape", "axis_graph_stages", "axis_objectives")


def test_overrides_only_apply_to_a_one_option_set():
    with pytest.raises(ValueError, match="only a one-option set takes overrides"):
        list(cli_args._expand([{"use": "hw-fields", "help": "x"}], {}))


@pytest.mark.parametrize("text, value", [("none", None), (" None ", None), ("2.5", 2.5)])
def test_time_limit_reads_seconds_or_none(text, value):
    assert cli_args.time_limit(text) == value


@pytest.mark.parametrize("text", ["0", "-1", "inf", "nan", "soon"])
def test_time_limit_refuses_what_is_not_a_positive_number(text):
    with pytest.raises(argparse.ArgumentTypeError, match="positive number of seconds"):
        cli_args.time_limit(text)


@pytest.mark.parametrize(("text", "value"), [("500", 500), ("20,000", 20_000), ("none", None)])
def test_cap_reads_a_count_or_none(text, value):
    assert cli_args.cap(text) == value


@pytest.mark.parametrize("text", ["0", "-1", "1.5", "soon", "9" * 30])
def test_cap_refuses_what_is_not_a_positive_count(text):
    with pytest.raises(argparse.ArgumentTypeError, match="positive whole number"):
        cli_args.cap(text)

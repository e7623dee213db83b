"""Argument helpers shared by the ``fusion-dse`` subcommands: the hardware options.

Every subcommand that costs or searches plans takes a preset or YAML file (``--hw``) and
overrides of its fields; `add_hw_arguments` adds them to a parser and `hw_overrides` turns the
parsed values into the overrides `simulator.hw.load_hw` takes. The subcommand modules
(`fusion_dse.cli`, `fusion_dse.cli_optimize`, ...) import this module, never each other.
"""

from __future__ import annotations

import argparse

from simulator.errors import InputError

__all__ = ["HW_FLAGS", "add_flag_table", "add_allow_opaque", "add_format", "add_hw_arguments",
           "add_model", "add_subcommand", "hw_overrides"]

HW_FLAGS = (
    ("--buffer", "buffer", "SIZE", "on-chip buffer size, e.g. 128KiB, 2MiB, 131072"),
    ("--dtype-bytes", "dtype_bytes", "B", "bytes per element (1 = int8)"),
    ("--dram-bandwidth", "dram_bandwidth", "B/CYC", "DRAM bytes per cycle"),
    ("--dram-latency", "dram_latency", "CYC", "DRAM access latency in cycles"),
    ("--clock", "clock", "HZ", "clock, e.g. 1GHz or 700e6"),
    ("--macs-per-cycle", "macs_per_cycle", "N", "PE array MACs per cycle"),
    ("--buffer-bandwidth", "buffer_bandwidth", "B/CYC", "on-chip buffer bytes per cycle"),
)
"""(flag, hardware key, metavar, help) of each hardware field with its own option."""


def add_flag_table(p: argparse.ArgumentParser | argparse._ArgumentGroup,
                   table: tuple[tuple[str, str, str, str], ...], prefix: str) -> None:
    """Add one option per (flag, key, metavar, help) row of `table`, stored as PREFIX_KEY."""
    for flag, key, metavar, text in table:
        p.add_argument(flag, dest=f"{prefix}_{key}", metavar=metavar, help=text)


def add_subcommand(sub: argparse._SubParsersAction, name: str, help: str,
                   description: str, epilog: str | None = None,
                   **kwargs: object) -> argparse.ArgumentParser:
    """``sub.add_parser(name, help=, description=, epilog=, **kwargs)``."""
    return sub.add_parser(name, help=help, description=description, epilog=epilog, **kwargs)


def add_format(p: argparse.ArgumentParser | argparse._ArgumentGroup,
               choices: tuple[str, ...] = ("table", "json"), default: str = "table",
               help: str | None = None) -> None:
    """``--format`` with `choices` and `default` (help: "output format (default: DEFAULT)")."""
    p.add_argument("--format", choices=choices, default=default,
                   help=help or f"output format (default: {default})")


def add_model(p: argparse.ArgumentParser) -> None:
    """The positional MODEL (zoo name, .onnx path or module:callable)."""
    p.add_argument("model", metavar="MODEL", help="zoo name, .onnx path or module:callable")


def add_allow_opaque(p: argparse.ArgumentParser) -> None:
    """``--allow-opaque``: import unsupported ops as opaque ops."""
    p.add_argument("--allow-opaque", action="store_true",
                   help="import unsupported ops as opaque ops instead of failing")


def add_hw_arguments(p: argparse.ArgumentParser, default: str | None = "edge-npu",
                     default_text: str = "edge-npu") -> None:
    """Add ``--hw``, one option per `HW_FLAGS` entry, ``--set KEY=VALUE`` and
    ``--allow-extreme-hw`` to `p`."""
    g = p.add_argument_group("hardware", "a preset or YAML file, and overrides of its fields")
    g.add_argument("--hw", default=default, metavar="PRESET|FILE",
                   help=f"hardware preset name or YAML path (default: {default_text})")
    add_flag_table(g, HW_FLAGS, "hw")
    g.add_argument("--set", dest="hw_set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any hardware key, e.g. --set energy.mac_pj=0.2 (repeatable)")
    g.add_argument("--allow-extreme-hw", action="store_true",
                   help="accept hardware values outside the physically meaningful ranges "
                        "(docs/limits.md), within the numerically safe ones")


def hw_overrides(args: argparse.Namespace) -> dict[str, object]:
    """The hardware overrides given on the command line, by hardware key.

    Raises:
        InputError: a ``--set`` item that is not ``KEY=VALUE``.
    """
    overrides: dict[str, object] = {key: getattr(args, f"hw_{key}") for _, key, _, _ in HW_FLAGS
                                    if getattr(args, f"hw_{key}") is not None}
    for item in args.hw_set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set {item!r}: expected KEY=VALUE")
        overrides[key.strip()] = value.strip()
    return overrides

"""The command-line surface: ``cli.toml`` turned into argparse parsers, and parsed-value helpers.

Every subcommand, help text and option of ``fusion-dse`` is declared once, as data, in the
package file ``fusion_dse/cli.toml`` (its header says how); `build_parser` builds the parsers
from it, resolving the names the file leaves to the caller (registry names, scheme values,
registry constants) and attaching each subcommand's code. `option_dests` names the options of a
shared set (`hw_overrides` reads the hardware ones by it; ``sweep`` its axes), `time_limit`
parses ``--exact-time-limit``. The subcommand modules (`fusion_dse.cli`,
`fusion_dse.cli_optimize`, ...) import this module, never each other.
"""

from __future__ import annotations

import argparse
import importlib.resources
import re
import sys
import tomllib
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any

from simulator.errors import InputError

__all__ = ["DEFAULT_OUT_ROOT", "EXIT_USAGE", "Parser", "build_parser", "hw_overrides",
           "cap", "installed_version", "model_and_shape", "option_dests", "surface",
           "time_limit"]

DEFAULT_OUT_ROOT = "fusion-dse-out"
"""Folder, relative to the working directory, under which results are written by default."""
EXIT_USAGE = 2
"""Exit status of bad input of any kind."""

Run = Callable[[argparse.Namespace], str]
_FORMATTERS = {"raw": argparse.RawDescriptionHelpFormatter}
_PARSER_KEYS = ("help", "usage", "description", "epilog")


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2, like every other bad input."""

    def _print_message(self, message: str, file: Any = None) -> None:
        """As argparse's, but a failed write is raised (argparse drops it, so ``--help``
        to a full disk would exit 0 having written nothing)."""
        if message:
            (file or sys.stderr).write(message)

    def error(self, message: str) -> None:  # type: ignore[override]
        from simulator.limits import one_line

        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)}\n")


def time_limit(text: str) -> float | None:
    """``--exact-time-limit``: positive seconds, or ``none``."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds or 'none', "
                                         f"got {text!r}")
    return value


def cap(text: str) -> int | None:
    """A work cap (``--exact-max-costed``): a positive whole number, or ``none``."""
    if text.strip().lower() == "none":
        return None
    try:
        value = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        value = 0
    if value <= 0 or len(text) > 20:
        raise argparse.ArgumentTypeError(f"must be a positive whole number or 'none', "
                                         f"got {text[:40]!r}")
    return value


_TYPES: dict[str, Callable[[str], Any]] = {"int": int, "time_limit": time_limit, "cap": cap}


def installed_version() -> str:
    """The version of the installed ``fusion-dse`` distribution (`importlib.metadata`); the
    package's ``__version__`` when it runs from a source tree that is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fusion-dse")
    except PackageNotFoundError:
        from fusion_dse import __version__

        return __version__


class _Version(argparse.Action):
    """``--version``: print ``PROG VERSION`` and exit 0; the version is read only when asked
    (`installed_version`), not each time the parser is built."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        parser._print_message(f"{parser.prog} {installed_version()}\n", sys.stdout)
        parser.exit()


_ACTIONS: dict[str, type[argparse.Action]] = {"installed-version": _Version}


@cache
def surface() -> Mapping[str, Any]:
    """The parsed ``fusion_dse/cli.toml`` (package data, read once)."""
    text = importlib.resources.files("fusion_dse").joinpath("cli.toml").read_text("utf-8")
    return tomllib.loads(text)


def build_parser(runs: Mapping[str, Run], values: Mapping[str, Any]) -> Parser:
    """The ``fusion-dse`` parser, as ``cli.toml`` declares it.

    Args:
        runs: The code of each subcommand, by name (stored as ``args.run``).
        values: What the file names and leaves to the caller: ``choices_from`` and
            ``default_from`` sources and the values of its {placeholders}.

    Raises:
        KeyError: a subcommand without code, or a name the file uses that `values` lacks.
    """
    spec = surface()
    parser = Parser(prog=spec["prog"], description=spec["description"])
    for option, variables in _expand(spec.get("options", []), {}):
        _add_option(parser, {}, option, {**values, **variables})
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=Parser)
    for name, command in spec["commands"].items():
        p = sub.add_parser(name, **{k: command[k].format_map(values)
                                    for k in _PARSER_KEYS if k in command},
                           formatter_class=_FORMATTERS.get(command.get("formatter", ""),
                                                           argparse.HelpFormatter))
        groups: dict[str, argparse._ArgumentGroup] = {}
        for option, variables in _expand(command["options"], {}):
            _add_option(p, groups, option, {**values, **variables})
        p.set_defaults(run=runs[name])
    return parser


def option_dests(set_name: str) -> tuple[str, ...]:
    """The ``dest`` of every option of the shared set `set_name` of ``cli.toml``, in order."""
    return tuple(option["dest"] for option, _ in _expand([{"use": set_name}], {}))


def _expand(entries: list[dict[str, Any]], variables: Mapping[str, Any]
            ) -> Iterator[tuple[dict[str, Any], Mapping[str, Any]]]:
    """Each option of `entries` with its placeholder values, ``use`` references expanded."""
    for entry in entries:
        name = entry.get("use")
        if name is None:
            yield entry, variables
            continue
        options = surface()["sets"][name]["options"]
        local = {**variables, **entry.get("vars", {})}
        overrides = {k: v for k, v in entry.items() if k not in ("use", "vars")}
        if overrides and len(options) != 1:
            raise ValueError(f"cli.toml: only a one-option set takes overrides, not {name!r}")
        if overrides:
            yield {**options[0], **overrides}, local
        else:
            yield from _expand(options, local)


def _add_option(p: argparse.ArgumentParser, groups: dict[str, argparse._ArgumentGroup],
                option: Mapping[str, Any], values: Mapping[str, Any]) -> None:
    """Add one option of ``cli.toml`` to `p` (or to its argument group, made on first use)."""
    kwargs: dict[str, Any] = {}
    for key, value in option.items():
        if key.endswith("_from"):
            kwargs[key.removesuffix("_from")] = values[value]
        elif key == "type":
            kwargs["type"] = _TYPES[value]
        elif key == "action" and value in _ACTIONS:
            kwargs["action"] = _ACTIONS[value]
        elif key == "hidden":
            kwargs["help"] = argparse.SUPPRESS
        elif key not in ("flags", "name", "group"):
            kwargs[key] = value.format_map(values) if isinstance(value, str) else value
    target: argparse.ArgumentParser | argparse._ArgumentGroup = p
    if "group" in option:
        if option["group"] not in groups:
            group = surface()["groups"][option["group"]]
            groups[option["group"]] = p.add_argument_group(group["title"],
                                                           group.get("description"))
        target = groups[option["group"]]
    target.add_argument(*option.get("flags", [option.get("name")]), **kwargs)


def hw_overrides(args: argparse.Namespace) -> dict[str, object]:
    """The hardware overrides given on the command line, by hardware key.

    Raises:
        InputError: a ``--set`` item that is not ``KEY=VALUE``.
    """
    overrides: dict[str, object] = {dest.removeprefix("hw_"): getattr(args, dest)
                                    for dest in option_dests("hw-fields")
                                    if getattr(args, dest) is not None}
    for item in args.hw_set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set {item!r}: expected KEY=VALUE")
        overrides[key.strip()] = value.strip()
    return overrides


def model_and_shape(args: argparse.Namespace) -> tuple[Any, str | None]:
    """(MODEL, --input-shape) to load, or (the bound graph, None) when ``--bind`` is given or
    ``--input-shape`` names symbols (`simulator.workload.rdp.load_bound`).

    Raises:
        InputError: bad bindings (one line naming the symbol and, where one is at fault, the
            op), a symbolic shape without ``--bind``, or the loader's errors.
    """
    shape, bindings = args.input_shape, getattr(args, "bind", None)
    if bindings is None and (shape is None or re.fullmatch(r"[\d\s,x]*", shape)):
        return args.model, shape
    from simulator.workload.rdp import load_bound

    return load_bound(args.model, shape, bindings,
                      allow_opaque=getattr(args, "allow_opaque", False)), None

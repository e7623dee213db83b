"""`search.registry`: every entry resolves and builds what it names, options reach the factory,
bad names are quoted, and reading the registry (the CLI parser) imports neither pymoo nor torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from explain.tree_split import GetSplitter
from search.registry import EXPLAINERS, REPAIRS, SEARCHES, Registry, Strategy
from search.splitter import RandomSplitter
from simulator.errors import InputError


@pytest.mark.parametrize("registry", [SEARCHES, REPAIRS, EXPLAINERS], ids=lambda r: r.kind)
def test_every_entry_builds_a_strategy_of_its_name(registry):
    for entry in registry:
        made = registry.create(entry.name)
        assert made.name == entry.name, entry
        assert entry.help and entry.supports("lbdf") and entry.supports("brr")
        assert not entry.supports("lbl")


def test_names_and_order_are_what_the_cli_offers():
    assert SEARCHES.names() == ("rs", "ls", "nsga2", "exact", "auto")
    assert REPAIRS.names() == ("random", "alledges", "gnne", "pg", "rg")
    assert EXPLAINERS.by(lambda s: s.trainer is not None) == ("pg", "rg")
    assert "LS" in SEARCHES and "sa" not in SEARCHES and 3 not in SEARCHES


def test_repair_options_reach_the_guided_factory_and_only_it():
    assert REPAIRS.create("random", max_edges=2, keep_baseline=False) == RandomSplitter()
    every = REPAIRS.create("alledges")
    assert isinstance(every, GetSplitter) and every.max_edges is None and every.keep_baseline
    two = REPAIRS.create("alledges", max_edges=2, keep_baseline=False)
    assert two.max_edges == 2 and not two.keep_baseline
    assert REPAIRS.create("gnne").max_edges == 4  # Algorithm 1's default top edges
    assert two.report() == {**two.stats.to_dict(), "max_edges": 2, "keep_baseline": False}


def test_unknown_names_are_quoted_with_the_choices():
    with pytest.raises(InputError, match="unknown search algorithm 'sa'; choose one of rs, ls, "
                                         "nsga2, exact, auto"):
        SEARCHES.create("sa")
    with pytest.raises(InputError, match="unknown repair 'get'; choose one of random, alledges"):
        REPAIRS.get("get")


def test_a_registry_refuses_duplicate_and_malformed_entries():
    registry = Registry("thing", (Strategy("a", "search.splitter:RandomSplitter", "a thing"),))
    with pytest.raises(ValueError, match="registered already"):
        registry.register(Strategy("a", "search.splitter:RandomSplitter", "again"))
    for bad in (Strategy("B", "m:f", "upper case"), Strategy("c", "no-callable", "no colon")):
        with pytest.raises(ValueError, match="bad thing entry"):
            registry.register(bad)


def test_building_the_cli_parser_loads_neither_pymoo_nor_torch():
    code = ("import sys; from fusion_dse.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('pymoo', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"

"""The zoo catalog (``simulator/workload/zoo_catalog.json``): what the loader and ``fusion-dse
models`` know of the zoo without torch must be the zoo as the code builds it now."""

from __future__ import annotations

import json

import pytest

from simulator.workload.loader import load, resolve_zoo_name
from simulator.workload.zoo import ZOO
from simulator.workload.zoo_catalog import CATALOG_PATH, catalog, measure_catalog


def test_the_catalog_names_every_zoo_network_as_the_zoo_does():
    assert list(catalog()) == list(ZOO)
    for name, facts in catalog().items():
        entry = ZOO[name]
        assert (facts.kind, facts.family, facts.input_shape, facts.resolution_axes) == \
            (entry.kind, entry.family, entry.input_shape, entry.resolution_axes)
        assert resolve_zoo_name(name.upper().replace("_", "-")) == name


def test_the_shipped_catalog_is_the_zoo_measured_now():
    """Every network is built and imported again and must give the shipped figures. After a
    change to the zoo or the importers, rewrite the file:
    ``python -m simulator.workload.zoo_catalog --write``."""
    shipped = json.loads(CATALOG_PATH.read_text("utf-8"))
    fresh = measure_catalog()
    assert {k: v for k, v in fresh.items() if k != "models"} == \
        {k: v for k, v in shipped.items() if k != "models"}
    assert [m["name"] for m in fresh["models"]] == [m["name"] for m in shipped["models"]]
    for now, then in zip(fresh["models"], shipped["models"], strict=True):
        assert now == then, f"{now['name']}: zoo_catalog.json is stale (rerun with --write)"


def test_resolutions_are_checked_from_the_catalog():
    """A resolution the network cannot take is refused as `ZooEntry.shape_at` refuses it."""
    with pytest.raises(ValueError, match="takes one sequence length, not 512x64"):
        ZOO["bert_base"].shape_at((512, 64))
    from simulator.workload.errors import InputShapeError

    with pytest.raises(InputShapeError, match="bert_base@... takes one sequence length"):
        load("bert_base@512x64")
    with pytest.raises(InputShapeError, match=r"sets axes \(2, 3\) of the input shape"):
        load("resnet18@64", "1,3")

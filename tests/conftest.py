"""Fixtures shared by every test folder, and how the tests are spread over pytest-xdist
workers."""

from __future__ import annotations

import pytest

from fusion_dse.cli import main

SHARED_SCOPES = ("module", "package", "session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests of a module that share one of the project's module-scoped fixtures (a sweep
    store, a Dask cluster, an optimize run) form one ``xdist_group``: under ``-n 2 --dist
    loadgroup`` they run on one worker, which builds the fixture once; every other test goes to
    whichever worker is free."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        for name in item.fixturenames:
            defs = info.name2fixturedefs.get(name, ())
            if defs and defs[-1].scope in SHARED_SCOPES and defs[-1].baseid.startswith("tests"):
                item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
                break


@pytest.fixture
def cli(capsys):
    """Run `fusion-dse ARGV...` in-process; returns (exit status, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            code = main(list(argv))
        except SystemExit as stop:  # argparse usage errors
            code = stop.code
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def one_torch_thread():
    """Run the test with one torch thread (several times faster on these tiny graphs), then
    restore the previous count."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)

"""Fixtures shared by every test folder."""

from __future__ import annotations

import pytest

from fusion_dse.cli import main


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

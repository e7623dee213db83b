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

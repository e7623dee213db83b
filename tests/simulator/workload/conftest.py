"""Helpers of the workload tests (the one-torch-thread fixture is in tests/conftest.py)."""

from __future__ import annotations

import pytest


def torchvision_or_skip():
    """The torchvision package (its import warnings silenced), or skip the test without it."""
    import warnings

    from simulator.workload.loader import import_torchvision

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return import_torchvision()
    except ImportError:
        pytest.skip("torchvision is not installed")

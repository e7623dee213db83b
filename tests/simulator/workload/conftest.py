"""Fixtures of the workload tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def one_torch_thread():
    """Run the test with one torch thread (several times faster on these tiny graphs), then
    restore the previous count."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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

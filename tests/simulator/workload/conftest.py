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

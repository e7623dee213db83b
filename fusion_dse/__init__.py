"""fusion-dse: design-space exploration of layer fusion for CNN accelerators.

The application layer: the command line (`fusion_dse.cli`), report rendering and the Python API.
"""

from simulator.workload.graph import ComputeGraph
from simulator.workload.loader import load

__all__ = ["ComputeGraph", "load"]
__version__ = "0.1.0"

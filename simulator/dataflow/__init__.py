"""The dataflows, one object each behind one protocol (`Dataflow`), by name.

``DATAFLOWS`` maps every declared scheme to its dataflow: LBDF, BRR, layer by layer and their
hybrid, and any registered later. A new dataflow is one module holding a `Dataflow` (its name
declared with its capabilities by `Scheme.declare`) plus one call, `register(obj)`; from then on
the cost cache, the searches, the exact solver, the simulator, `evaluate`, `compare` and sweeps
take its name. Nothing outside a dataflow's own module branches on its name.
"""

from __future__ import annotations

from simulator.dataflow.base import Dataflow, DataflowBase, GroupRun
from simulator.dataflow.brr import BRR
from simulator.dataflow.hybrid import HYBRID
from simulator.dataflow.lbdf import LBDF
from simulator.dataflow.lbl import LBL
from simulator.errors import InputError
from simulator.scheme import Scheme

__all__ = ["DATAFLOWS", "Dataflow", "DataflowBase", "GroupRun", "dataflow", "register",
           "unregister"]

DATAFLOWS: dict[Scheme, Dataflow] = {}
"""Every registered dataflow by its scheme, in registration order."""


def register(obj: Dataflow) -> Dataflow:
    """Register the dataflow `obj` under its scheme (declared with `Scheme.declare`).

    Raises:
        ValueError: another dataflow is registered under that name.
    """
    if not isinstance(obj, Dataflow):
        raise ValueError(f"{obj!r} is not a Dataflow")
    Scheme.reinstate(obj.scheme)  # registered again after `unregister`
    known = DATAFLOWS.get(obj.scheme)
    if known is not None and known is not obj:
        raise ValueError(f"dataflow {obj.scheme!r} is registered already")
    DATAFLOWS[obj.scheme] = obj
    return obj


def unregister(obj: Dataflow) -> None:
    """Remove the dataflow `obj` and withdraw its name (`register` undone; the built-ins stay).

    Raises:
        ValueError: `obj` is a built-in dataflow or is not the one registered.
    """
    if obj in _BUILTIN or DATAFLOWS.get(obj.scheme) is not obj:
        raise ValueError(f"dataflow {obj.scheme!r} is not a registered extension")
    del DATAFLOWS[obj.scheme]
    Scheme.withdraw(str(obj.scheme))


def dataflow(scheme: str | Scheme) -> Dataflow:
    """The dataflow called `scheme`.

    Raises:
        InputError: no dataflow is registered under that name.
    """
    try:
        return DATAFLOWS[Scheme.parse(scheme)]
    except KeyError:
        raise InputError(f"scheme {str(scheme)!r} has no registered dataflow") from None


_BUILTIN = (LBDF, BRR, LBL, HYBRID)
for _builtin in _BUILTIN:
    register(_builtin)

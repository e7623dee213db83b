"""Write the golden optimize outputs the refactor must reproduce bit for bit.

Run from the repository root: ``python tests/golden/make_golden.py``. Each configuration of
`CASES` writes ``tests/golden/optimize/<name>/`` with plan.json, history.csv and summary.json
(timing fields removed, see `stable_summary`). `tests/golden/test_golden.py` re-runs them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GOLDEN = HERE / "optimize"

MODELS = ("mobilenet_v2", "squeezenet1_0", "resnet50")
SCHEMES = ("lbdf", "brr")
SEARCHES = ("rs", "ls", "nsga2")
REPAIRS = ("random", "rg")
BUDGET = 60
BUFFER = "128KiB"
SEED = 3

CASES = [(m, sc, se, r) for m in MODELS for sc in SCHEMES for se in SEARCHES for r in REPAIRS]

VOLATILE = {"seconds", "baseline_seconds", "explainer_seconds", "seconds_per_plan"}


def case_name(model: str, scheme: str, search: str, repair: str) -> str:
    return f"{model}-{scheme}-{search}-{repair}"


def stable_summary(summary: object) -> object:
    """The summary without wall-clock figures (they differ from run to run)."""
    if isinstance(summary, dict):
        return {k: stable_summary(v) for k, v in summary.items()
                if k not in VOLATILE and not k.endswith("_seconds")}
    if isinstance(summary, list):
        return [stable_summary(v) for v in summary]
    return summary


def run_case(model: str, scheme: str, search: str, repair: str, out: Path) -> None:
    from fusion_dse.optimization import optimize, write_outputs

    result = optimize(model, "edge-npu", scheme=scheme, search=search, repair=repair,
                      budget=BUDGET, seed=SEED, overrides={"buffer": BUFFER},
                      graph_stages="none")  # the search on the graph as imported
    write_outputs(result, out)
    summary = json.loads((out / "summary.json").read_text())
    (out / "summary.json").write_text(json.dumps(stable_summary(summary), indent=2,
                                                 sort_keys=True) + "\n")
    for extra in ("budget.png", "pareto.png", "pareto.csv"):
        (out / extra).unlink(missing_ok=True)


def main() -> None:
    sys.path.insert(0, str(ROOT))
    import torch

    torch.set_num_threads(1)
    for case in CASES:
        out = GOLDEN / case_name(*case)
        run_case(*case, out)
        print(out.name, flush=True)


if __name__ == "__main__":
    main()

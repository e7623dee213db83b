"""What the sweep's ``input_shape`` axis saves by binding one symbolic import per model.

For each network, exports the zoo module to ONNX with dynamic H and W (``dim_param`` height,
width), then times, in this process:

* re-import: ``load(model.onnx, 1,3,R,R)`` for every resolution R (what a sweep point did
  before: the ONNX importer has no cache);
* reuse: one ``load_symbolic(model.onnx, 1,3,H,W)`` (import at the reference shape + RDP),
  then ``bind`` per resolution (what `fusion_dse.sweep.point.model_graph` does);
* the same two as whole layer-by-layer sweep points (`run_point`, scheme lbl), which add
  the costing of each point.

Every bound graph is checked equal to the re-imported one. Run:

    python benchmarks/symbolic_sweep.py [--models mobilenet_v2,resnet50] [--res 128,...]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch

from fusion_dse.sweep import point as point_module
from fusion_dse.sweep.spec import Point
from simulator.workload.loader import load, zoo_module
from simulator.workload.rdp import load_symbolic


def export(name: str, path: Path) -> None:
    """The zoo network `name` as ONNX with dynamic height and width."""
    module = zoo_module(name).eval()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(module, (torch.randn(1, 3, 224, 224),), str(path), dynamo=False,
                              input_names=["x"],
                              dynamic_axes={"x": {2: "height", 3: "width"}})
        finally:
            logging.disable(logging.NOTSET)


def _points(path: Path, resolutions: list[int]) -> list[Point]:
    return [Point(str(path), "edge-npu", "lbl", None, None, None, None, None,
                  input_shape=f"1,3,{r},{r}") for r in resolutions]


def _run_points(points: list[Point], reuse: bool) -> float:
    point_module._TEMPLATES.clear()
    original = point_module.model_graph
    if not reuse:
        point_module.model_graph = lambda p: p.model  # the former path: load at each shape
    try:
        started = time.perf_counter()
        rows = [point_module.run_point(p, str(i)) for i, p in enumerate(points)]
        seconds = time.perf_counter() - started
    finally:
        point_module.model_graph = original
    failed = [r["error"] for r in rows if r["status"] != "done"]
    if failed:
        raise SystemExit(f"a point failed: {failed[0]}")
    return seconds


def _measure(path: Path, resolutions: list[int], points: list[Point]) -> tuple[float, ...]:
    """One repeat: (re-import, reuse, its import+RDP, its binds, points before, after)."""
    started = time.perf_counter()
    plain = [load(str(path), (1, 3, r, r)) for r in resolutions]
    reimport = time.perf_counter() - started
    started = time.perf_counter()
    symbolic = load_symbolic(str(path))
    imported = time.perf_counter() - started
    bound = [symbolic.bind({"height": r, "width": r}) for r in resolutions]
    reuse = time.perf_counter() - started
    if bound != plain:
        raise SystemExit(f"{path.stem}: a bound graph differs from the re-imported one")
    return (reimport, reuse, imported, reuse - imported, _run_points(points, False),
            _run_points(points, True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,resnet50,deeplabv3_mobilenet_v3_large")
    parser.add_argument("--res", default="128,256,512,768,1024")
    parser.add_argument("--repeats", type=int, default=3, help="median of (default: 3)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    resolutions = [int(r) for r in args.res.split(",")]
    print(f"{len(resolutions)} resolutions {args.res}; seconds, median of {args.repeats}")
    print(f"{'model':30} {'re-import':>10} {'reuse':>7} {'(import+RDP,':>13} {'binds)':>7} "
          f"{'points before':>14} {'points after':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            path = Path(tmp) / f"{name}.onnx"
            export(name, path)
            points = _points(path, resolutions)
            _run_points(points, False)  # warm every import and cache on the way
            _run_points(points, True)
            runs = [_measure(path, resolutions, points) for _ in range(args.repeats)]
            m = [statistics.median(column) for column in zip(*runs, strict=True)]
            print(f"{name:30} {m[0]:9.2f}s {m[1]:6.2f}s {m[2]:12.2f}s {m[3]:6.3f}s "
                  f"{m[4]:13.2f}s {m[5]:12.2f}s")


if __name__ == "__main__":
    main()

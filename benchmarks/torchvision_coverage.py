"""Which torchvision models the torch importer takes: issue [workloads] item 1's coverage count.

Every classification model (``torchvision.models.list_models(module=torchvision.models)``) and
every segmentation model (``torchvision.models.segmentation``) is built with random weights
(``weights=None``) and imported through `simulator.workload.coverage.survey_torch`, which is
`from_torch` with each refused op named instead of raised. Per model it prints whether
`from_torch` imports it, its ops, the first refused op by name and the seconds; then the counts
and the refused ops ranked by the number of models they stop.

    nice python benchmarks/torchvision_coverage.py [--models a,b] [--size 224]
        [--construct-limit 60] [--json out.json]
    python benchmarks/torchvision_coverage.py --markdown out.json   # docs/importers.md's part

A model whose construction takes over --construct-limit seconds is skipped and reported as
such, as is one whose two copies (the module and the traced copy) would not fit in half the
memory available when it is reached.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import signal
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from simulator.workload.coverage import survey_torch  # noqa: E402
from simulator.workload.graph import OpKind  # noqa: E402
from simulator.workload.loader import import_torchvision  # noqa: E402


class _Timeout(Exception):
    pass


@contextmanager
def _limit(seconds: float) -> Iterator[None]:
    """Raise `_Timeout` in the main thread after `seconds` (SIGALRM; POSIX only)."""
    def fire(signum: int, frame: Any) -> None:
        raise _Timeout

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def model_names() -> list[tuple[str, str]]:
    """(family, name) of every torchvision classification and segmentation model."""
    tv = import_torchvision()
    models = tv.models
    return ([("classification", n) for n in models.list_models(module=models)]
            + [("segmentation", n) for n in models.list_models(module=models.segmentation)])


def _kwargs(family: str) -> dict[str, Any]:
    return {"weights": None, "weights_backbone": None} if family == "segmentation" \
        else {"weights": None}


def _param_bytes(name: str, family: str) -> int | None:
    """Bytes of the model's parameters and buffers, from a construction on the meta device
    (None when the model cannot be built there: RegNets compute their widths with tensors)."""
    tv = import_torchvision()
    try:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = tv.models.get_model(name, **_kwargs(family))
    except Exception:  # noqa: BLE001 - any failure only means "size unknown"
        return None
    return sum(t.numel() * t.element_size() for t in [*m.parameters(), *m.buffers()])


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def run_model(family: str, name: str, size: int, construct_limit: float) -> dict[str, Any]:
    """Build and survey one model; its row as a dict."""
    tv = import_torchvision()
    row: dict[str, Any] = {"family": family, "model": name}
    nbytes, avail = _param_bytes(name, family), _available_bytes()
    need = 2 * (nbytes or 0)
    if nbytes is not None:
        row["param_mb"] = round(nbytes / 2**20)
    if avail is not None and need > avail // 2:
        row["skipped"] = (f"needs ~{need / 2**30:.1f} GiB for two copies, "
                          f"{avail / 2**30:.1f} GiB available")
        return row
    t = time.perf_counter()
    try:
        with _limit(construct_limit), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = tv.models.get_model(name, **_kwargs(family)).eval()
    except _Timeout:
        row["skipped"] = f"construction over {construct_limit:g} s"
        return row
    row["construct_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    try:
        survey = survey_torch(module, (1, 3, size, size), name=name)
    except Exception as err:  # a shape failure or a bug: reported, not fatal to the run
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        row.update(imports=False, error=f"{type(err).__name__}: {first[:160]}")
        return row
    finally:
        del module
        gc.collect()
    row["import_s"] = round(time.perf_counter() - t, 2)
    row["imports"] = survey.imports
    if survey.error:
        row["error"] = survey.error.splitlines()[0][:160]
    if survey.graph is not None:
        row["ops"] = len(survey.graph)
        row["opaque_ops"] = sum(op.kind is OpKind.OPAQUE for op in survey.graph.ops)
    row["refused"] = list(survey.refused)
    return row


def _first_refused(row: dict[str, Any]) -> str:
    if row.get("refused"):
        return row["refused"][0]
    if row.get("error"):
        return "(" + row["error"][:60] + ")"
    return ""


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts per family and the refused ops ranked by how many models they stop."""
    out: dict[str, Any] = {}
    for family in ("classification", "segmentation"):
        fam = [r for r in rows if r["family"] == family]
        out[family] = {"models": len(fam), "imports": sum(bool(r.get("imports")) for r in fam),
                       "skipped": sum("skipped" in r for r in fam)}
    stops = Counter(op for r in rows for op in set(r.get("refused", ())))
    first = Counter(r["refused"][0] for r in rows if r.get("refused"))
    out["refused"] = [{"op": op, "models": n, "first_in": first[op]}
                      for op, n in sorted(stops.items(), key=lambda kv: (-kv[1], kv[0]))]
    return out


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'family':<15}{'model':<32}{'imports':<9}{'ops':>6}{'opaque':>8}  first refused")
    for r in rows:
        if "skipped" in r:
            print(f"{r['family']:<15}{r['model']:<32}{'skipped':<9}{'':>6}{'':>8}  "
                  f"({r['skipped']})")
            continue
        print(f"{r['family']:<15}{r['model']:<32}{'yes' if r.get('imports') else 'no':<9}"
              f"{r.get('ops', ''):>6}{r.get('opaque_ops', ''):>8}  {_first_refused(r)}")
    s = summary(rows)
    for family in ("classification", "segmentation"):
        f = s[family]
        print(f"{family}: {f['imports']} of {f['models']} import "
              f"({f['skipped']} skipped)")
    print("refused ops (models stopped, models where it is the first refused):")
    for item in s["refused"]:
        print(f"  {item['op']:<32}{item['models']:>4}{item['first_in']:>4}")


def markdown(result: dict[str, Any]) -> str:
    """The measured part of docs/importers.md, from a --json result."""
    rows, s = result["rows"], summary(result["rows"])
    lines = ["## Measured: torchvision models through `from_torch`", "",
             f"Measured with `{result['command']}` (torch {result['torch']}, torchvision "
             f"{result['torchvision']}, input 1x3x{result['size']}x{result['size']}, "
             f"{result['seconds']:.0f} s on {result['machine']}).", ""]
    for family in ("classification", "segmentation"):
        f = s[family]
        skipped = [r for r in rows if r["family"] == family and "skipped" in r]
        note = "" if not skipped else " (skipped: " + "; ".join(
            f"{r['model']}, {r['skipped']}" for r in skipped) + ")"
        lines.append(f"- **{family}**: {f['imports']} of {f['models']} import{note}.")
    lines += ["", "Refused ops, by the number of models each stops (a model may be stopped by "
              "several):", "", "| op | models it stops | first refused op in |", "|---|---|---|"]
    lines += [f"| `{i['op']}` | {i['models']} | {i['first_in']} |" for i in s["refused"]]
    lines += ["", "`ops` counts the IR ops; for a model that does not import, with its refused ops "
              "as opaque ops (what `--allow-opaque` gives).", "",
              "| model | family | imports | ops | first refused op |", "|---|---|---|---|---|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['model']} | {r['family']} | skipped | | {r['skipped']} |")
            continue
        first = _first_refused(r)
        lines.append(f"| {r['model']} | {r['family']} | {'yes' if r.get('imports') else 'no'} "
                     f"| {r.get('ops', '')} | {f'`{first}`' if first else ''} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated model names (default: all)")
    ap.add_argument("--size", type=int, default=224, help="input height and width")
    ap.add_argument("--construct-limit", type=float, default=60.0,
                    help="skip a model whose construction takes longer (seconds)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--json", help="write the rows and counts to this file")
    ap.add_argument("--markdown", metavar="JSON", help="print the docs section of a --json file")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())), end="")
        return 0
    torch.set_num_threads(args.threads)
    names = model_names()
    if args.models:
        wanted = set(args.models.split(","))
        names = [(f, n) for f, n in names if n in wanted]
    start = time.perf_counter()
    rows = []
    for family, name in names:
        rows.append(run_model(family, name, args.size, args.construct_limit))
        r = rows[-1]
        print(f"# {name}: {'skipped' if 'skipped' in r else 'yes' if r.get('imports') else 'no'}"
              f" {_first_refused(r)}", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - start
    print_table(rows)
    if args.json:
        tv = import_torchvision()
        command = "python benchmarks/torchvision_coverage.py" + (
            f" --size {args.size}" if args.size != 224 else "") + (
            f" --construct-limit {args.construct_limit:g}" if args.construct_limit != 60.0
            else "")
        result = {"rows": rows, "summary": summary(rows), "size": args.size,
                  "seconds": seconds, "torch": torch.__version__,
                  "torchvision": tv.__version__, "command": command,
                  "machine": f"{platform.machine()}, {os.cpu_count()} CPUs"}
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

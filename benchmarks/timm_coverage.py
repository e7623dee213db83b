"""Coverage of timm models by the torch.export importer (issue [workloads-2], Deliver 5).

A fixed list of 166 timm models (the smallest of each architecture of timm 1.0.31's model
modules at 224 px, plus the models the issue names), random weights (``pretrained=False``;
a parameter timm initialises to all zeros, such as a classifier head, is drawn at random so
that the outputs compare), input 1x3x224x224. For each model: whether
`simulator.workload.export_import.from_export_with_params` imports it, else the one-line
reason; the IR executor's output against the module's (relative error: largest absolute
difference over the largest absolute output, limit 1e-4); the IR's weights against the
module's parameters (BatchNorms folded reconciled; any other difference listed with its
reason); the graph's JSON round trip. Nothing is downloaded.

    python benchmarks/timm_coverage.py --json timm.json [--shard 1/4] [--models a,b]
    python benchmarks/timm_coverage.py --markdown timm.json [more.json ...]   # later wins
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MODELS: tuple[str, ...] = (
    "bat_resnext26ts", "beit_base_patch16_224", "caformer_s18", "cait_xxs24_224",
    "coat_lite_tiny", "coat_tiny", "coatnet_pico_rw_224", "coatnext_nano_rw_224",
    "convformer_s18", "convit_tiny", "convnext_atto", "convnext_zepto_rms", "convnextv2_atto",
    "cpubone_nano", "cs3darknet_focus_s", "cspdarknet53", "cspnext_tiny", "cspresnet50",
    "darknet17", "davit_tiny", "deit3_small_patch16_224", "deit_small_patch16_224",
    "deit_tiny_patch16_224", "densenet121", "densenetblur121d", "dla34", "dla46x_c", "dpn48b",
    "dpn68", "eca_nfnet_l0", "eca_resnet33ts", "eca_vovnet39b", "ecaresnet50d_pruned",
    "ecaresnext26t_32x4d", "edgenext_xx_small", "efficientformer_l1", "efficientformerv2_s0",
    "efficientnet_b0", "efficientnet_lite0", "efficientnetv2_rw_t", "efficientvim_m1",
    "efficientvit_b0", "efficientvit_m0", "ese_vovnet19b_slim_dw", "eva02_tiny_patch14_224",
    "fasternet_t0", "fastvit_t8", "fbnetc_100", "fbnetv3_b", "focalnet_tiny_srf",
    "gc_efficientnetv2_rw_t", "gcresnet33ts", "gcvit_xxtiny", "gernet_s", "ghostnet_050",
    "ghostnet_100", "ghostnetv3_050", "gmixer_12_224", "gmlp_ti16_224", "halonet26t",
    "haloregnetz_b", "hardcorenas_b", "hgnet_tiny", "hgnetv2_b0", "hiera_tiny_224",
    "hrnet_w18_small", "iformer_t", "inception_next_atto", "inception_v3", "lambda_resnet26t",
    "lcnet_035", "lcnet_050", "lcnetv2_small", "legacy_seresnet18", "levit_128s",
    "levit_conv_128s", "lowformer_b0", "mambaout_femto", "maxvit_tiny_rw_224", "mixer_s16_224",
    "mixnet_s", "mnasnet_100", "mnasnet_small", "mobilenet_edgetpu_100", "mobilenetv1_100",
    "mobilenetv2_035", "mobilenetv3_large_075", "mobilenetv3_small_050",
    "mobilenetv4_conv_small", "mobileone_s0", "mobileone_s1", "mobilevit_xxs",
    "mobilevitv2_050", "mvitv2_tiny", "nest_tiny", "nextvit_small", "nf_regnet_b0",
    "nf_resnet26", "nfnet_l0", "pit_ti_224", "poolformer_s12", "poolformerv2_s12", "pvt_v2_b0",
    "rdnet_tiny", "regnetv_040", "regnetx_002", "regnety_002", "regnety_004", "regnetz_005",
    "regnetz_b16", "repghostnet_050", "repvgg_a0", "repvit_m1", "res2net50_26w_4s",
    "res2next50", "resmlp_12_224", "resnest14d", "resnet18", "resnet34", "resnet50",
    "resnet50_clip_gap", "resnet50d", "resnetaa34d", "resnetblur18", "resnetv2_18",
    "resnetv2_50x1_bit", "resnext26ts", "resnext50_32x4d", "rexnet_100", "rexnetr_100",
    "selecsls42", "semnasnet_050", "sequencer2d_s", "seresnet18", "seresnext26t_32x4d",
    "shvit_s1", "skresnet18", "spnasnet_100", "starnet_s050", "swiftformer_xs",
    "swin_tiny_patch4_window7_224", "swinv2_cr_tiny_224", "tf_efficientnet_b0",
    "tf_efficientnetv2_b0", "tf_mixnet_s", "tf_mobilenetv3_small_075", "tiny_vit_5m_224",
    "tinynet_e", "tnt_s_legacy_patch16_224", "tresnet_m", "twins_pcpvt_small",
    "twins_svt_small", "visformer_tiny", "vit_base_patch32_224",
    "vit_relpos_small_patch16_224", "vit_small_patch16_224", "vit_small_patch16_rope_224",
    "vit_srelpos_small_patch16_224", "vit_tiny_patch16_224", "vit_tiny_r_s16_p8_224",
    "vitamin_small_224", "volo_d1_224", "vovnet39a", "xception41", "xcit_nano_12_p8_224",
    "xcit_tiny_12_p16_224",
)
"""The fixed list (166 models)."""

LIMIT = 1e-4


def _randomise_zeros(module) -> None:  # noqa: ANN001
    import torch

    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in module.parameters():
            if p.numel() and not bool(p.ne(0).any()):
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)


def measure(name: str) -> dict:
    """One model's record."""
    import torch

    from simulator.errors import InputError
    from simulator.workload.execute import execute
    from simulator.workload.export_import import from_export_with_params
    from simulator.workload.graph import ComputeGraph
    from simulator.workload.loader import _import_module

    timm = _import_module("timm")
    started = time.perf_counter()
    rec: dict = {"model": name}
    try:
        module = timm.create_model(name, pretrained=False).eval()
    except Exception as err:  # noqa: BLE001 - a model timm cannot build here
        return {**rec, "status": "not built", "reason": f"{type(err).__name__}: {err}"[:200]}
    _randomise_zeros(module)
    rec["params"] = sum(int(p.numel()) for p in module.parameters())
    shape = (1, 3, 224, 224)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph, params, result = from_export_with_params(module, shape, name=name)
    except InputError as err:
        return {**rec, "status": "refused", "reason": str(err).splitlines()[0][:300],
                "seconds": round(time.perf_counter() - started, 1)}
    except Exception as err:  # noqa: BLE001 - a traceback: the importer's bug
        return {**rec, "status": "crashed", "reason": f"{type(err).__name__}: {err}"[:300],
                "seconds": round(time.perf_counter() - started, 1)}
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = module(x)
    ref = ref[0] if isinstance(ref, (tuple, list)) else ref
    try:
        out = execute(graph, params, x)[0]
        err = float((out - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
    except Exception as exc:  # noqa: BLE001
        err = math.inf
        rec["executor_error"] = str(exc)[:200]
    expected = rec["params"] - result.folded_params
    rec.update(status="imported", ops=len(graph), weights=graph.total_weights,
               macs=graph.total_macs, folded_bn_params=result.folded_params,
               param_difference=graph.total_weights - expected, rel_error=err,
               round_trip=ComputeGraph.from_json(graph.to_json()) == graph,
               seconds=round(time.perf_counter() - started, 1))
    return rec


def _reason_op(reason: str) -> str:
    if "unsupported op " in reason:
        return reason.split("unsupported op ", 1)[1].split(" at node")[0]
    if "torch.export cannot export" in reason:
        return "torch.export: " + reason.split(": ", 2)[-1][:80]
    return reason[:80]


def markdown(records: dict[str, dict], meta: dict) -> str:
    rows = [records[m] for m in MODELS if m in records]
    built = [r for r in rows if r["status"] != "not built"]
    imported = [r for r in built if r["status"] == "imported"]
    exact = [r for r in imported if r["rel_error"] <= LIMIT]
    crashed = [r for r in built if r["status"] == "crashed"]
    lines = [
        "## Measured: timm models through `from_export`",
        "",
        f"Measured with `{meta.get('command', 'python benchmarks/timm_coverage.py')}` "
        f"(timm {meta.get('timm')}, torch {meta.get('torch')}, input 1x3x224x224, random "
        f"weights, {meta.get('machine')}).",
        "",
        f"- **{len(imported)} of {len(built)}** models that build import "
        f"({100 * len(imported) / max(1, len(built)):.1f} %); {len(rows) - len(built)} of the "
        f"{len(rows)} listed do not build; {len(crashed)} end in a traceback.",
        f"- executor check: {len(exact)} of {len(imported)} imports within relative error "
        f"{LIMIT:g} of the module's output (largest "
        f"{max((r['rel_error'] for r in imported), default=0):.1e}); every graph's JSON round "
        f"trip {'exact' if all(r['round_trip'] for r in imported) else 'NOT exact'}.",
        f"- parameters: {sum(r['param_difference'] == 0 for r in imported)} of "
        f"{len(imported)} imports have the module's parameter count once folded BatchNorms "
        "are reconciled; the others are listed below with the reason.",
        "",
    ]
    reasons = Counter(_reason_op(r["reason"]) for r in built if r["status"] != "imported")
    if reasons:
        lines += ["Refused, by reason (the first refusal of each model):", "",
                  "| reason | models |", "|---|---|"]
        lines += [f"| `{k}` | {v} |" for k, v in reasons.most_common()]
        lines.append("")
    diffs = [r for r in imported if r["param_difference"]]
    if diffs:
        lines += ["Parameter counts that differ from the module's (IR weights minus the "
                  "module's parameters less folded BatchNorms). Positive: a constant computed "
                  "from parameters counts at the shape it is used (a relative position bias "
                  "gathered from its table for every head and token pair, a position "
                  "embedding interpolated or repeated); negative: parameters folded into a "
                  "constant computed from them (weight standardisation's gains, a "
                  "re-parameterised branch, a layer scale multiplied into a weight) or not "
                  "used in the forward pass:", "",
                  "| model | module parameters | IR weights | difference |", "|---|---|---|---|"]
        lines += [f"| {r['model']} | {r['params']:,} | {r['weights']:,} | "
                  f"{r['param_difference']:+,} |" for r in diffs]
        lines.append("")
    lines += ["| model | imports | ops | relative error | seconds | reason |",
              "|---|---|---|---|---|---|"]
    for r in rows:
        if r["status"] == "imported":
            lines.append(f"| {r['model']} | yes | {r['ops']} | {r['rel_error']:.1e} | "
                         f"{r['seconds']} | |")
        else:
            lines.append(f"| {r['model']} | {r['status']} | | | {r.get('seconds', '')} | "
                         f"{_reason_op(r['reason']).replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the records (JSON lines) to this file")
    parser.add_argument("--markdown", nargs="+", help="render these record files")
    parser.add_argument("--models", help="comma-separated subset of the list")
    parser.add_argument("--shard", default="1/1", help="K/N: every N-th model from the K-th")
    args = parser.parse_args(argv)
    if args.markdown:
        records: dict[str, dict] = {}
        meta: dict = {}
        for path in args.markdown:
            for line in Path(path).read_text().splitlines():
                doc = json.loads(line)
                if "meta" in doc:
                    meta = doc["meta"]
                else:
                    records[doc["model"]] = doc
        print(markdown(records, meta), end="")
        return 0
    import torch

    from simulator.workload.loader import _import_module

    torch.set_num_threads(1)
    timm = _import_module("timm")
    k, n = (int(v) for v in args.shard.split("/"))
    names = args.models.split(",") if args.models else list(MODELS)[k - 1::n]
    out = open(args.json, "a") if args.json else None  # noqa: SIM115
    meta = {"timm": timm.__version__, "torch": torch.__version__,
            "machine": f"{platform.machine()}, {len(__import__('os').sched_getaffinity(0))} "
                       "CPUs",
            "command": "python benchmarks/timm_coverage.py --json timm.json"}
    if out:
        out.write(json.dumps({"meta": meta}) + "\n")
    counts = Counter()
    for name in names:
        rec = measure(name)
        counts[rec["status"]] += 1
        extra = f"err {rec['rel_error']:.1e} ops {rec['ops']}" if rec["status"] == "imported" \
            else rec.get("reason", "")
        print(f"{name}: {rec['status']} {extra}", flush=True)
        if out:
            out.write(json.dumps(rec) + "\n")
            out.flush()
    print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The command line as a user meets it: outputs, stable JSON keys, and bad input."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import pandas as pd
import pytest

from simulator.workload.graph import ComputeGraph

MODEL_KEYS = {"name", "kind", "family", "input_shape", "ops", "convs", "params", "weights",
              "macs", "activation_bytes"}


def test_models_json_lists_the_zoo_with_stable_keys(cli):
    code, out, _ = cli("models", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["format"] == "fusion-dse.models" and doc["dtype_bytes"] == 1
    rows = {m["name"]: m for m in doc["models"]}
    assert len(rows) == 18 and all(set(m) == MODEL_KEYS for m in rows.values())
    assert rows["resnet50"]["params"] == 25_557_032
    assert (rows["resnet50"]["kind"], rows["resnet50"]["family"]) == ("cnn", "resnet")
    assert sum(m["kind"] == "cnn" for m in rows.values()) == 13
    assert (rows["bert_base"]["kind"], rows["bert_base"]["family"]) == ("transformer", "bert")
    assert rows["bert_base"]["input_shape"] == [1, 128, 768] and rows["bert_base"]["convs"] == 0
    decode = rows["llama_tiny_decode"]
    assert (decode["kind"], decode["family"], decode["input_shape"]) == ("decoder", "llama",
                                                                         [1, 1, 512])
    assert rows["vit_b_16"]["params"] == rows["vit_b_16"]["weights"] == 86_567_656
    assert rows["efficientnet_b3"]["input_shape"] == [1, 3, 300, 300]
    assert rows["resnet18"]["convs"] == 20


def test_models_table_is_readable(cli):
    code, out, _ = cli("models")
    assert code == 0
    assert "deeplabv3_mobilenet_v3_large" in out and "138,357,544" in out


def test_inspect_formats(cli):
    code, out, _ = cli("inspect", "resnet18", "--format", "csv")
    table = pd.read_csv(io.StringIO(out))
    assert code == 0 and len(table) == 49
    assert list(table.columns[:4]) == ["id", "name", "kind", "op_type"]
    assert table.loc[0, "kind"] == "conv" and table.loc[0, "inputs"] == "in0"
    code, out, _ = cli("inspect", "resnet18@64", "--format", "json")
    g = ComputeGraph.from_json(out)
    assert g.input_shapes == ((1, 3, 64, 64),)
    code, out, _ = cli("inspect", "squeezenet1_1", "--input-shape", "1,3,96,96")
    assert code == 0 and "1x3x96x96" in out and "Many-to-Many" in out


@pytest.mark.parametrize("argv, message", [
    (["inspect", "resnet5O"], "unknown model 'resnet5O'.*did you mean resnet50"),
    (["inspect", "missing.onnx"], "missing.onnx"),
    (["inspect", "resnet18", "--input-shape", "1,4,224,224"], "does not fit model"),
    (["inspect", "resnet18", "--input-shape", "1,3,x"], "not a comma-separated"),
    (["models", "--dtype-bytes", "0"], "--dtype-bytes must be positive"),
    (["inspect"], "the following arguments are required: MODEL"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_is_one_line_with_exit_status_2(cli, argv, message):
    code, _, err = cli(*argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert re.search(message, lines[0]), lines[0]


def test_corrupt_onnx_and_unsupported_op_via_the_console(tmp_path, cli):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01 not a protobuf \xff" * 10)
    code, _, err = cli("inspect", str(bad))
    assert code == 2 and "bad.onnx" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "odd_net.py").write_text(
        "from torch import nn\n"
        "def build():\n"
        "    return nn.Sequential(nn.Conv2d(3, 4, 1), nn.Unflatten(1, (1, 4)),\n"
        "                         nn.Conv3d(1, 1, 1))\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        code, _, err = cli("inspect", "odd_net:build", "--input-shape", "1,3,4,4")
        # refused by name, in one line, at the torch.export node of the 3-D convolution
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert "3-D convolution" in err and "convolution_1" in err and "--allow-opaque" in err
        code, out, err = cli("inspect", "odd_net:build", "--input-shape", "1,3,4,4",
                             "--allow-opaque")
        assert code == 0 and "opaque" in out and "warning" in err
    finally:
        sys.path.remove(str(tmp_path))


def test_console_entry_point_runs_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "fusion_dse", "inspect", "nope"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("fusion-dse: error: unknown model 'nope'")
    assert "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "fusion_dse", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "models" in proc.stdout and "inspect" in proc.stdout

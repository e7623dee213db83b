"""Write the small committed files of the bad-input corpus (``files/``); run it from the
repository root after changing it: ``.venv/bin/python tests/hardening/make_files.py``.

The large ones (100,000-deep JSON, files over the size limits, a FIFO) are made at test time
by `generated_files` instead, so the repository stays small.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from onnx import TensorProto, helper, numpy_helper

FILES = Path(__file__).resolve().parent / "files"

HW = """\
name: corpus
buffer: 256KiB
dram_bandwidth: 16
dram_latency: 100
clock: 1GHz
macs_per_cycle: 256
buffer_bandwidth: 64
energy:
  dram_pj_per_byte: 100
  buffer_pj_per_byte: 1
  mac_pj: 0.5
"""


def _graph_doc() -> dict:
    op = {"id": 0, "name": "conv", "kind": "conv", "op_type": "conv", "inputs": [-1],
          "input_shapes": [[1, 3, 8, 8]], "output_shape": [1, 4, 8, 8], "kernel": [3, 3],
          "stride": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1,
          "weight_elems": 112, "macs": 6912, "mapping": "Many-to-Many", "attrs": {}}
    relu = {**op, "id": 1, "name": "relu", "kind": "eltwise_unary", "op_type": "relu",
            "inputs": [0], "input_shapes": [[1, 4, 8, 8]], "kernel": [1, 1], "padding": [0] * 4,
            "weight_elems": 0, "macs": 0, "mapping": "One-to-One"}
    return {"format": "fusion-dse.graph", "version": 1, "name": "tiny",
            "inputs": [{"name": "x", "shape": [1, 3, 8, 8]}], "ops": [op, relu], "outputs": [1]}


def _graph_variant(path: str, change) -> None:
    doc = _graph_doc()
    change(doc)
    (FILES / path).write_text(json.dumps(doc))


def _onnx_files() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(__import__("numpy").ones((4, 3, 3, 3), "float32"), "w")
    conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], name="conv")
    graph = helper.make_graph([conv], "dyn", [x], [y], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              FILES / "dynamic-conv.onnx")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "C", "H", "W"])
    graph = helper.make_graph([conv], "dyn", [x], [y], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              FILES / "dynamic-all.onnx")
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 3, 8, 8])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 3, 8, 8])
    e = helper.make_node("Einsum", ["a"], ["b"], equation="nchw->nchw", name="einsum")
    graph = helper.make_graph([e], "einsum", [a], [b])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              FILES / "einsum.onnx")
    (FILES / "corrupt.onnx").write_bytes(b"\x08\x07garbage that is no protobuf \xff\xff")
    (FILES / "empty.onnx").write_bytes(b"")


def main() -> None:
    FILES.mkdir(exist_ok=True)
    (FILES / "hw-ok.yaml").write_text(HW)
    laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for k in range(1, 9):
        prev, cur = chr(ord("a") + k - 1), chr(ord("a") + k)
        laughs.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    (FILES / "hw-laughs.yaml").write_text("\n".join(laughs) + "\n")
    top = ['- &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for k in range(1, 9):
        prev, cur = chr(ord("a") + k - 1), chr(ord("a") + k)
        top.append(f"- &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    (FILES / "hw-laughs-list.yaml").write_text("\n".join(top) + "\n")
    (FILES / "hw-latin1.yaml").write_bytes(HW.replace("corpus", "caf\xe9").encode("latin-1"))
    (FILES / "hw-huge-buffer.yaml").write_text(HW.replace("256KiB", "1e54"))
    (FILES / "hw-tiny-bandwidth.yaml").write_text(HW.replace("dram_bandwidth: 16",
                                                              "dram_bandwidth: 1e-300"))
    (FILES / "hw-huge-latency.yaml").write_text(HW.replace("latency: 100", "latency: 1e29"))
    (FILES / "hw-infinite-energy.yaml").write_text(HW.replace("mac_pj: 0.5", "mac_pj: .inf"))
    (FILES / "hw-python-tag.yaml").write_text(HW + "x: !!python/object/apply:os.system ['id']\n")
    (FILES / "hw-duplicate.yaml").write_text(HW + "buffer: 1MiB\n")
    (FILES / "hw-unknown-key.yaml").write_text(HW + "bufer: 1MiB\n")
    (FILES / "hw-missing-key.yaml").write_text(HW.replace("clock: 1GHz\n", ""))
    (FILES / "hw-malformed.yaml").write_text("name: [unclosed\nbuffer: 1\n")
    (FILES / "hw-list.yaml").write_text("- 1\n- 2\n")
    (FILES / "hw-empty.yaml").write_text("")
    (FILES / "hw-energy-scalar.yaml").write_text(HW.split("energy:")[0] + "energy: 5\n")
    (FILES / "hw-long-name.yaml").write_text(HW.replace("corpus", "n" * 300))
    (FILES / "plan-latin1.json").write_bytes('{"groups": [["caf\xe9"]]}'.encode("latin-1"))
    (FILES / "plan-not-json.json").write_text("{groups: [[0]]}")
    (FILES / "plan-empty.json").write_text("")
    (FILES / "plan-nan.json").write_text('{"groups": [[NaN]]}')
    (FILES / "plan-number.json").write_text("42")
    (FILES / "plan-groups-dict.json").write_text('{"groups": {"a": 1}}')
    (FILES / "plan-unknown-op.json").write_text('{"groups": [["no_such_op"]]}')
    (FILES / "plan-bad-id.json").write_text('{"groups": [[100000]]}')
    (FILES / "plan-negative-id.json").write_text('{"groups": [[-1]]}')
    (FILES / "plan-bool.json").write_text('{"groups": [[true]]}')
    (FILES / "plan-empty-group.json").write_text('{"groups": [[]]}')
    (FILES / "plan-twice.json").write_text('{"groups": [[0, 0]]}')
    (FILES / "plan-missing-ops.json").write_text('{"groups": [[0]]}')
    (FILES / "plan-overlap.json").write_text('{"groups": [[0, 1], [1]]}')
    (FILES / "plan-bad-scheme.json").write_text('{"groups": [[0]], "scheme": "fastest"}')
    (FILES / "plan-unknown-hw.json").write_text(
        '{"groups": [[0]], "hw": "my-own-chip", "buffer_bytes": 1024}')
    (FILES / "graph-latin1.json").write_bytes(
        json.dumps(_graph_doc()).replace("tiny", "caf\xe9").encode("latin-1"))
    _graph_variant("graph-negative-dim.json",
                   lambda d: d["ops"][1].update(output_shape=[1, -4, 8, 8]))
    _graph_variant("graph-negative-macs.json", lambda d: d["ops"][0].update(macs=-5))
    _graph_variant("graph-negative-weights.json",
                   lambda d: d["ops"][0].update(weight_elems=-112))
    _graph_variant("graph-zero-stride.json", lambda d: d["ops"][0].update(stride=[0, 1]))
    _graph_variant("graph-negative-padding.json",
                   lambda d: d["ops"][0].update(padding=[-1, 0, 0, 0]))
    _graph_variant("graph-wrong-format.json", lambda d: d.update(format="other"))
    _graph_variant("graph-wrong-version.json", lambda d: d.update(version=99))
    _graph_variant("graph-missing-ops.json", lambda d: d.pop("ops"))
    _graph_variant("graph-bad-kind.json", lambda d: d["ops"][0].update(kind="warp-drive"))
    _graph_variant("graph-back-edge.json", lambda d: d["ops"][0].update(inputs=[1]))
    _graph_variant("graph-shape-mismatch.json",
                   lambda d: d["ops"][1].update(input_shapes=[[1, 5, 8, 8]]))
    (FILES / "graph-list.json").write_text("[1, 2, 3]")
    (FILES / "graph-infinity.json").write_text(
        json.dumps(_graph_doc()).replace('"macs": 6912', '"macs": Infinity'))
    (FILES / "hardening_exit7.py").write_text(
        '"""A model factory that exits."""\nimport sys\n\n\ndef model():\n    sys.exit(7)\n')
    (FILES / "hardening_exit_on_import.py").write_text(
        '"""A module that exits when imported."""\nimport sys\n\nsys.exit(3)\n')
    (FILES / "hardening_bad_factory.py").write_text(
        '"""Factories that fail or return the wrong thing."""\n\n\ndef raises():\n'
        '    raise RuntimeError("boom")\n\n\ndef not_a_module():\n    return 42\n')
    _onnx_files()


if __name__ == "__main__":
    main()

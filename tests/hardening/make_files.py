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


SPEC = "axes:\n  models: [resnet18]\n  buffers: 64KiB\n"


def _spec_files() -> None:
    """Sweep specs: bad files, bad YAML, wrong types, values over the limits, names."""
    specs = {
        "spec-ok.yaml": SPEC,
        "spec-latin1.yaml": None,
        "spec-list.yaml": "- resnet18\n- vgg16\n",
        "spec-empty.yaml": "",
        "spec-malformed.yaml": "axes: {models: [resnet18]\n",
        "spec-python-tag.yaml": SPEC + "x: !!python/object/apply:os.system ['id']\n",
        "spec-duplicate.yaml": SPEC + "  buffers: 128KiB\n",
        "spec-unknown-key.yaml": SPEC + "workers: 3\n",
        "spec-axes-list.yaml": "axes: [models, resnet18]\n",
        "spec-axes-missing.yaml": "name: x\n",
        "spec-axis-mapping.yaml": "axes:\n  models: [resnet18]\n  buffers: {small: 64KiB}\n",
        "spec-models-mapping.yaml": "axes:\n  models: {resnet18: 1}\n",
        "spec-models-empty.yaml": "axes:\n  models: []\n",
        "spec-models-null.yaml": "axes:\n  models:\n",
        "spec-models-bool.yaml": "axes:\n  models: [true]\n",
        "spec-models-nested.yaml": "axes:\n  models: [[resnet18, vgg16]]\n",
        "spec-seeds-float.yaml": SPEC + "  seeds: [0.5]\n",
        "spec-seeds-huge.yaml": SPEC + "  seeds: 0..100000000000\n",
        "spec-seed-too-big.yaml": SPEC + "  seeds: [9223372036854775808]\n",
        "spec-seed-5000-digits.yaml": SPEC + "  seeds: [" + "9" * 5000 + "]\n",
        "spec-bandwidth-nan.yaml": SPEC + "  dram_bandwidth: .nan\n",
        "spec-bandwidth-inf.yaml": SPEC + "  dram_bandwidth: .inf\n",
        "spec-step-tiny.yaml": SPEC + "  dram_bandwidth: 1..2:0.0000001\n",
        "spec-step-geometric.yaml": "axes:\n  models: [resnet18]\n  buffers: 1KiB..1GiB:x1.00001\n",
        "spec-product.yaml": SPEC + "  seeds: 0..999\n  dram_bandwidth: 1..200\n",
        "spec-include-huge.yaml": SPEC + "  seeds: 0..9999\ninclude:\n"
                                  "  - {dram_bandwidth: 1..20}\n",
        "spec-include-mapping.yaml": SPEC + "include: {scheme: lbl}\n",
        "spec-exclude-scalar.yaml": SPEC + "exclude: [lbl]\n",
        "spec-exclude-all.yaml": SPEC + "exclude:\n  - {model: resnet18}\n",
        "spec-include-empty-axis.yaml": SPEC + "include:\n  - {scheme: []}\n",
        "spec-name-int.yaml": "name: 5\n" + SPEC,
        "spec-name-traversal.yaml": "name: ../../../escaped\n" + SPEC,
        "spec-name-absolute.yaml": "name: /tmp/fusion-dse-escaped\n" + SPEC,
        "spec-name-control.yaml": 'name: "red\\e[31mname"\n' + SPEC,
        "spec-name-long.yaml": "name: " + "n" * 150 + "\n" + SPEC,
        "spec-name-dot.yaml": "name: .hidden\n" + SPEC,
        "spec-model-control.yaml": 'axes:\n  models: ["res\\e[2Jnet"]\n',
        "spec-laughs.yaml": None,
    }
    for name, text in specs.items():
        if text is not None:
            (FILES / name).write_text(text)
    (FILES / "spec-latin1.yaml").write_bytes("name: caf\xe9\n".encode("latin-1")
                                             + SPEC.encode())
    laughs = ["x: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for k in range(1, 7):
        prev, cur = chr(ord("a") + k - 1), chr(ord("a") + k)
        laughs.append(f"x{k}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    (FILES / "spec-laughs.yaml").write_text(SPEC + "\n".join(laughs) + "\n")


def _graph_files() -> None:
    """Graph documents with values of the wrong type or out of range (read strictly)."""
    def number(path: str, old: str, new: str) -> None:
        text = json.dumps(_graph_doc())
        assert old in text, old
        (FILES / path).write_text(text.replace(old, new, 1))

    number("graph-float-dim.json", '"output_shape": [1, 4, 8, 8]',
           '"output_shape": [1, 4, 111.5, 8]')
    number("graph-float-macs.json", '"macs": 6912', '"macs": 111.5')
    number("graph-bool-macs.json", '"macs": 6912', '"macs": true')
    number("graph-null-name.json", '"name": "conv"', '"name": null')
    number("graph-null-macs.json", '"macs": 6912', '"macs": null')
    number("graph-1e400.json", '"macs": 6912', '"macs": 1e400')
    number("graph-neg-1e400.json", '"weight_elems": 112', '"weight_elems": -1e400')
    number("graph-5000-digits.json", '"macs": 6912', '"macs": ' + "9" * 5000)
    number("graph-20-digits.json", '"macs": 6912', '"macs": ' + "9" * 20)
    number("graph-2-63.json", '"macs": 6912', '"macs": 9223372036854775807')
    number("graph-string-weights.json", '"weight_elems": 112', '"weight_elems": "112"')
    number("graph-float-id.json", '"id": 0', '"id": 0.0')
    number("graph-bool-groups.json", '"groups": 1', '"groups": true')
    number("graph-bool-version.json", '"version": 1', '"version": true')
    number("graph-float-version.json", '"version": 1', '"version": 1.0')
    number("graph-string-dim.json", '"shape": [1, 3, 8, 8]', '"shape": "1,3,8,8"')
    number("graph-huge-dim.json", '"shape": [1, 3, 8, 8]', '"shape": [1, 3, 8, 4000000]')
    number("graph-huge-elems.json", '"shape": [1, 3, 8, 8]',
           '"shape": [1000000, 1000000, 1000, 8]')
    number("graph-rank-9.json", '"shape": [1, 3, 8, 8]', '"shape": [1, 1, 1, 1, 1, 3, 1, 8, 8]')
    number("graph-kernel-3.json", '"kernel": [3, 3]', '"kernel": [3, 3, 3]')
    number("graph-kernel-huge.json", '"kernel": [3, 3]', '"kernel": [3, 9999999]')
    number("graph-padding-float.json", '"padding": [1, 1, 1, 1]', '"padding": [1, 1.5, 1, 1]')
    number("graph-inputs-string.json", '"inputs": [-1]', '"inputs": "-1"')
    number("graph-outputs-float.json", '"outputs": [1]', '"outputs": [1.0]')
    number("graph-kind-int.json", '"kind": "conv"', '"kind": 3')
    number("graph-mapping-unknown.json", '"mapping": "Many-to-Many"', '"mapping": "All"')
    number("graph-attr-object.json", '"attrs": {}', '"attrs": {"mode": {"a": 1}}')
    number("graph-attr-1e400.json", '"attrs": {}', '"attrs": {"scale": 1e400}')
    number("graph-attrs-list.json", '"attrs": {}', '"attrs": [1, 2]')
    number("graph-unknown-op-key.json", '"macs": 6912', '"mac": 6912')
    number("graph-unknown-key.json", '"name": "tiny"', '"name": "tiny", "extra": 1')
    number("graph-op-not-object.json", '"ops": [{', '"ops": [1, {')
    number("graph-long-name.json", '"name": "tiny"', '"name": "' + "t" * 2000 + '"')
    number("graph-input-name-int.json", '"name": "x"', '"name": 7')
    (FILES / "graph-ok.json").write_text(json.dumps(_graph_doc()))


def _onnx_bad_files() -> None:
    """ONNX models that are small but ask for too much, or declare what they do not hold."""
    import numpy as np

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    ones = numpy_helper.from_array(np.ones((4, 3, 3, 3), "float32"), "w")
    conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], name="conv")

    def save(name: str, nodes, inits, opset: int = 17, inputs=None, extra_opsets=()) -> None:
        graph = helper.make_graph(nodes, name.split(".")[0], inputs or [x], [y], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                        *extra_opsets])
        (FILES / name).write_bytes(model.SerializeToString())

    def i64(name: str, values) -> onnx.TensorProto:
        return numpy_helper.from_array(np.array(values, dtype="int64"), name)

    save("onnx-opset-99.onnx", [conv], [ones], opset=99)
    save("onnx-opset-huge.onnx", [conv], [ones], opset=2**40)
    save("onnx-opset-old.onnx", [conv], [ones], opset=7)
    save("onnx-opset-twice.onnx", [conv], [ones],
         extra_opsets=[helper.make_opsetid("ai.onnx", 13)])
    big = helper.make_node("ConstantOfShape", ["s"], ["c"], name="fill",
                           value=numpy_helper.from_array(np.ones(1, "float32")))
    add = helper.make_node("Add", ["x", "c"], ["y"], name="add")
    save("onnx-constant-of-shape.onnx", [big, add], [i64("s", [100000, 3, 1000, 1000])])
    rng = helper.make_node("Range", ["a", "b", "d"], ["c"], name="range")
    save("onnx-range.onnx", [rng, helper.make_node("Add", ["x", "c"], ["y"], name="add")],
         [numpy_helper.from_array(np.array(0.0, "float32"), "a"),
          numpy_helper.from_array(np.array(1e12, "float32"), "b"),
          numpy_helper.from_array(np.array(1.0, "float32"), "d")])
    expand = helper.make_node("Expand", ["one", "s"], ["c"], name="expand")
    save("onnx-expand.onnx", [expand, add],
         [numpy_helper.from_array(np.ones((1, 1, 1, 1), "float32"), "one"),
          i64("s", [1, 3, 100000, 100000])])
    tile = helper.make_node("Tile", ["one", "r"], ["c"], name="tile")
    save("onnx-tile.onnx", [tile, add],
         [numpy_helper.from_array(np.ones((1, 3, 8, 8), "float32"), "one"),
          i64("r", [1, 1, 100000, 100000])])
    row = helper.make_node("ConstantOfShape", ["s1"], ["r1"], name="row",
                           value=numpy_helper.from_array(np.ones(1, "float32")))
    col = helper.make_node("ConstantOfShape", ["s2"], ["r2"], name="col",
                           value=numpy_helper.from_array(np.ones(1, "float32")))
    outer = helper.make_node("Add", ["r1", "r2"], ["c"], name="outer")
    save("onnx-broadcast.onnx", [row, col, outer, add],
         [i64("s1", [1, 3, 100000, 1]), i64("s2", [1, 3, 1, 100000])])
    shape = i64("shape", [1000000, 1000000])
    save("onnx-reshape-huge.onnx", [helper.make_node("Reshape", ["x", "shape"], ["y"],
                                                     name="reshape")], [shape])
    save("onnx-reshape-count.onnx", [helper.make_node("Reshape", ["x", "shape"], ["y"],
                                                      name="reshape")], [i64("shape", [1, 5])])
    save("onnx-zero-weight.onnx", [conv],
         [numpy_helper.from_array(np.ones((0, 3, 3, 3), "float32"), "w")])
    save("onnx-no-data.onnx", [conv],
         [onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 3, 3, 3])])
    save("onnx-short-data.onnx", [conv],
         [onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 3, 3, 3],
                           raw_data=b"\0" * 10)])
    save("onnx-long-data.onnx", [conv],
         [onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 3, 3, 3],
                           raw_data=b"\0" * 4000)])
    save("onnx-typed-short.onnx", [conv],
         [onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 3, 3, 3],
                           float_data=[1.0] * 7)])
    save("onnx-huge-declared.onnx", [conv],
         [onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1000000, 1000000])])
    save("onnx-constant-no-data.onnx",
         [helper.make_node("Constant", [], ["w"], name="weights", value=onnx.TensorProto(
             name="wv", data_type=TensorProto.FLOAT, dims=[4, 3, 3, 3])), conv], [])
    (FILES / "onnx-ext.bin").write_bytes(b"\0" * 432)
    for name, info in (("onnx-ext-offset.onnx", {"offset": "100000", "length": "432"}),
                       ("onnx-ext-length.onnx", {"offset": "0", "length": "16"}),
                       ("onnx-ext-short.onnx", {"offset": "400", "length": "432"}),
                       ("onnx-ext-outside.onnx", {"location": "../onnx-ext.bin"}),
                       ("onnx-ext-absolute.onnx", {"location": "/etc/hostname"}),
                       ("onnx-ext-missing.onnx", {"location": "onnx-nothere.bin"}),
                       ("onnx-ext-bad-offset.onnx", {"offset": "ten"})):
        t = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 3, 3, 3],
                             data_location=onnx.TensorProto.EXTERNAL)
        for key, value in {"location": "onnx-ext.bin", **info}.items():
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        save(name, [conv], [t])
    for name, dims in (("onnx-huge-input.onnx", [1, 3, 100000, 100000]),
                       ("onnx-huge-batch.onnx", [100000, 3, 224, 224]),
                       ("onnx-huge-dim.onnx", [1, 3, 8, 2000000])):
        save(name, [conv], [ones],
             inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)])


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
    _spec_files()
    _graph_files()
    _onnx_bad_files()


if __name__ == "__main__":
    main()

"""Synthetic networks built directly in the IR, for solver and scale measurements.

`hrnet_like` builds HRNet's topology (Wang et al. 2020, "Deep High-Resolution Representation
Learning"; timm's ``hrnet_w18_small`` by default) without torch: parallel branches at halving
resolutions that exchange their maps in every stage's fuse unit (each output sums every branch,
upsampled by a 1x1 conv and a nearest resize, or downsampled by strided 3x3 convs). Its wide
antichains (the branches, and the dozen short paths of a fuse unit) are what makes the exact
solver's down-set lattice explode, which a chain-like zoo network never shows. BatchNorm is taken
as folded into the convs, as the importers do.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import ComputeGraph, OpKind

__all__ = ["hrnet_like", "parallel_branches"]


class _Net:
    """Convs, ReLUs, adds and resizes on a `GraphBuilder`, named in order."""

    def __init__(self, name: str, shape: tuple[int, int, int, int]) -> None:
        self.b = GraphBuilder(name)
        self.b.add_input("x", shape)

    def conv(self, name: str, src: str, c_out: int, k: int = 3, stride: int = 1) -> str:
        n, c, h, w = self.b.shape_of(src)
        pad = k // 2
        ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        self.b.add_op(name, OpKind.CONV, "conv", [src], (n, c_out, ho, wo), kernel=(k, k),
                      stride=(stride, stride), padding=(pad, pad, pad, pad),
                      weight_elems=c_out * c * k * k + c_out,
                      macs=n * c_out * ho * wo * c * k * k)
        return name

    def relu(self, name: str, src: str) -> str:
        self.b.add_op(name, OpKind.ELTWISE_UNARY, "relu", [src], self.b.shape_of(src))
        return name

    def add(self, name: str, a: str, b: str) -> str:
        self.b.add_op(name, OpKind.ELTWISE_BINARY, "add", [a, b], self.b.shape_of(a))
        return name

    def upsample(self, name: str, src: str, factor: int) -> str:
        n, c, h, w = self.b.shape_of(src)
        self.b.add_op(name, OpKind.RESIZE, "resize", [src], (n, c, h * factor, w * factor),
                      attrs={"mode": "nearest", "scale": (float(factor), float(factor))})
        return name

    def concat(self, name: str, srcs: Sequence[str]) -> str:
        n, _, h, w = self.b.shape_of(srcs[0])
        c = sum(self.b.shape_of(x)[1] for x in srcs)
        self.b.add_op(name, OpKind.CONCAT, "concat", list(srcs), (n, c, h, w))
        return name

    def bottleneck(self, name: str, src: str, planes: int, out: int) -> str:
        y = self.relu(f"{name}.act1", self.conv(f"{name}.conv1", src, planes, k=1))
        y = self.relu(f"{name}.act2", self.conv(f"{name}.conv2", y, planes))
        y = self.conv(f"{name}.conv3", y, out, k=1)
        skip = self.conv(f"{name}.downsample", src, out, k=1)
        return self.relu(f"{name}.act3", self.add(f"{name}.add", y, skip))


def hrnet_like(*, resolution: int = 224, widths: Sequence[int] = (16, 32, 64, 128),
               blocks: int = 2, head: bool = True, stem: bool = True,
               name: str = "hrnet_like") -> ComputeGraph:
    """HRNet's topology in the IR: ``hrnet_like()`` is timm's ``hrnet_w18_small`` (225 ops as
    imported, the same op kinds, shapes, weights and MACs; `from_torch` of the timm model gives
    the same graph up to names).

    Args:
        resolution: Input height and width (a multiple of 4 x 2^(branches - 1)).
        widths: Channels of each branch; their number is the branches of the last stage
            (stages 2 .. len(widths), stage s with s branches).
        blocks: Basic blocks (conv3x3-relu-conv3x3, residual add, relu) per branch and stage.
        head: The classification head (per-branch bottlenecks, the downsampling chain, a 1x1
            conv to 2048 channels, global pool and a 1000-way linear layer); without it the
            last stage's branch maps are the network outputs.
        stem: The two stride-2 stem convs and the stage-1 bottleneck; without it the input
            feeds the first branches directly (at ``resolution``).
        name: The graph's name.
    """
    if len(widths) < 2:
        raise ValueError("hrnet_like needs at least two branches")
    net = _Net(name, (1, 3, resolution, resolution))
    x = "x"
    if stem:
        x = net.relu("act1", net.conv("conv1", x, 64, stride=2))
        x = net.relu("act2", net.conv("conv2", x, 64, stride=2))
        x = net.bottleneck("layer1.0", x, 32, 128)
    branches = [net.relu("transition1.0.act", net.conv("transition1.0", x, widths[0])),
                net.relu("transition1.1.act", net.conv("transition1.1", x, widths[1], stride=2))]
    for stage in range(2, len(widths) + 1):
        if stage > 2:  # a new branch from the last one, at half its resolution
            t = f"transition{stage - 1}.{stage - 1}"
            branches.append(net.relu(f"{t}.act", net.conv(t, branches[-1], widths[stage - 1],
                                                          stride=2)))
        branches = _stage(net, f"stage{stage}", branches, widths, blocks)
    if not head:
        return net.b.build(branches)
    heads = (32, 64, 128, 256)
    y = ""
    for i, b in enumerate(branches):
        planes = heads[i % len(heads)] * 2 ** (i // len(heads))
        inc = net.bottleneck(f"incre_modules.{i}", b, planes, planes * 4)
        if i == 0:
            y = inc
            continue
        down = net.relu(f"downsamp_modules.{i - 1}.act",
                        net.conv(f"downsamp_modules.{i - 1}", y, planes * 4, stride=2))
        y = net.add(f"head_add{i}", inc, down)
    y = net.relu("final_layer.act", net.conv("final_layer", y, 2048, k=1))
    n, c, h, w = net.b.shape_of(y)
    net.b.add_op("global_pool", OpKind.GLOBAL_POOL, "avg", [y], (n, c, 1, 1), kernel=(h, w),
                 stride=(h, w))
    net.b.add_op("flatten", OpKind.RESHAPE, "flatten", ["global_pool"], (n, c))
    net.b.add_op("classifier", OpKind.LINEAR, "linear", ["flatten"], (n, 1000),
                 weight_elems=c * 1000 + 1000, macs=n * c * 1000)
    return net.b.build(["classifier"])


def _stage(net: _Net, name: str, branches: list[str], widths: Sequence[int],
           blocks: int) -> list[str]:
    """One HRNet module: `blocks` basic blocks per branch, then the fuse unit."""
    outs = []
    for i, x in enumerate(branches):
        for k in range(blocks):
            p = f"{name}.branches.{i}.{k}"
            y = net.relu(f"{p}.act1", net.conv(f"{p}.conv1", x, widths[i]))
            y = net.conv(f"{p}.conv2", y, widths[i])
            x = net.relu(f"{p}.act2", net.add(f"{p}.add", y, x))
        outs.append(x)
    fused = []
    for i in range(len(outs)):
        y = ""
        for j, x in enumerate(outs):
            p = f"{name}.fuse_layers.{i}.{j}"
            if j > i:  # 1x1 conv to branch i's width, nearest upsampling
                term = net.upsample(f"{p}.up", net.conv(p, x, widths[i], k=1), 2 ** (j - i))
            elif j < i:  # i - j strided 3x3 convs, the last to branch i's width
                term = x
                for s in range(i - j):
                    last = s == i - j - 1
                    term = net.conv(f"{p}.{s}", term, widths[i] if last else widths[j],
                                    stride=2)
                    if not last:
                        term = net.relu(f"{p}.{s}.act", term)
            else:
                term = x
            y = term if not y else net.add(f"{name}.fuse{i}.add{j}", y, term)
        fused.append(net.relu(f"{name}.fuse{i}.act", y))
    return fused


def parallel_branches(*, stages: int = 3, branches: int = 4, depth: int = 3, width: int = 16,
                      resolution: int = 56, name: str = "parallel_branches") -> ComputeGraph:
    """HRNet's parallel branches without its exchange units: a stem conv, then `stages` times
    a fork into `branches` branches of `depth` conv3x3-relu pairs (branch i with
    ``width * 2**i`` channels) merged by a concat and a 1x1 conv back to `width` channels.

    Between a fork and its merge the down-sets are the product of the branches' prefixes
    ((2 depth + 1)^branches of them), and a group may start or end anywhere in every branch.
    """
    net = _Net(name, (1, 3, resolution, resolution))
    x = net.relu("stem.act", net.conv("stem", "x", width))
    for s in range(stages):
        outs = []
        for i in range(branches):
            y = x
            for k in range(depth):
                p = f"stage{s}.branch{i}.{k}"
                y = net.relu(f"{p}.act", net.conv(p, y, width * 2 ** i))
            outs.append(y)
        x = net.relu(f"stage{s}.merge.act",
                     net.conv(f"stage{s}.merge", net.concat(f"stage{s}.concat", outs), width, k=1))
    return net.b.build([x])

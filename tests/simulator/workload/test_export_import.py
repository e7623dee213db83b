"""The torch.export front end (`simulator.workload.export_import`): every mapped core-ATen op a
CNN, a ViT or a decoder uses, checked by the IR executor against the module (relative error
<= 1e-4), BatchNorm folded, unknown ops refused by name in one line, optional forward
arguments, and the graph JSON round trip of what it imports.

Each module below packs several ops, so the suite exports a few small programs only."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from simulator.workload.errors import UnsupportedOpError
from simulator.workload.execute import execute
from simulator.workload.export_import import from_export, from_export_with_params
from simulator.workload.graph import ComputeGraph, OpKind

pytestmark = pytest.mark.xdist_group(name="export_import")


def _check(module: nn.Module, shape, example=None, limit: float = 1e-4):
    module = module.eval()
    graph, params, result = from_export_with_params(module, shape, name="m", example=example)
    x = example[0] if example is not None else torch.randn(
        shape, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = module(x)
    out = execute(graph, params, x.to(torch.float32))[0]
    assert tuple(out.shape) == tuple(ref.shape)
    err = float((out - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
    assert err <= limit, err
    assert ComputeGraph.from_json(graph.to_json()) == graph
    return graph, result


class ConvBnFunctional(nn.Module):
    """timm's BatchNormAct2d: F.batch_norm after a conv, a conv without a padding argument,
    a BatchNorm that cannot fold (after an add), Conv1d + BatchNorm1d."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.w = nn.Parameter(torch.randn(8, 8, 1, 1) * 0.3)
        self.bn2 = nn.BatchNorm2d(8)
        self.conv1d = nn.Conv1d(8, 4, 3, padding=1)
        self.bn1d = nn.BatchNorm1d(4)
        for bn in (self.bn, self.bn2, self.bn1d):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        y = self.conv(x)
        y = F.batch_norm(y, self.bn.running_mean, self.bn.running_var, self.bn.weight,
                         self.bn.bias, False, 0.1, self.bn.eps)
        y = F.relu(y)
        z = F.conv2d(y, self.w)  # no padding argument
        z = self.bn2(z + y)  # not after a conv: stays a batchnorm op
        t = z.flatten(2)  # (N, C, L)
        t = F.silu(self.bn1d(self.conv1d(t)))
        return t


def test_conv_batchnorm_conv1d():
    graph, result = _check(ConvBnFunctional(), (1, 3, 8, 8))
    kinds = [op.kind for op in graph.ops]
    assert kinds.count(OpKind.BATCHNORM) == 1  # bn2; bn and bn1d folded
    assert len(result.folded) == 2
    conv1d = next(op for op in graph.ops if op.name == "conv1d")
    assert conv1d.kernel == (1, 3) and conv1d.padding == (0, 1, 0, 1)


class Reductions(nn.Module):
    """mean/sum/var/norm over any axes, normalize, pow, square, neg, addcmul, rsqrt, clamp."""

    def forward(self, x):  # x: (N, C, H, W)
        a = x.mean(dim=(2, 3), keepdim=True)  # global pool
        b = x.mean(dim=-1, keepdim=True)  # over W only
        c = x.sum(dim=1, keepdim=True)
        v = x.var(dim=(1, 3), keepdim=True)
        n = torch.linalg.vector_norm(x, dim=1, keepdim=True)
        u = F.normalize(x, dim=1)
        y = -x + a + b - c * 0.1 + v + n.pow(2) * 0.01 + u
        y = torch.addcmul(y, x, u, value=0.5) + torch.square(x) * 0.1
        y = y * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + 1e-5)
        return y.clamp(-3.0, 3.0) + x.amax(dim=(2, 3), keepdim=True)


def test_reductions_over_any_axes():
    graph, _ = _check(Reductions(), (2, 4, 6, 5))
    assert graph.count(OpKind.GLOBAL_POOL) >= 6


class Shapes(nn.Module):
    """pad (constant, reflect, shape-derived, -inf), unfold (im2col), repeat_interleave, roll, flip,
    expand, select, chunk, index with constant indices, interpolate, pools, cat."""

    def __init__(self) -> None:
        super().__init__()
        self.token = nn.Parameter(torch.randn(1, 1, 16))

    def forward(self, x):  # (1, 4, 8, 8)
        h = x.shape[-1]
        p = F.pad(x, (0, (3 - h % 3) % 3, 0, (3 - h % 3) % 3))  # TF-"same"-style pad
        p = F.pad(p, (1, 1, 1, 1), mode="reflect")
        p = F.pad(p, (0, 1, 0, 1), value=float("-inf"))  # TF-"same" max pooling's pad
        p = F.max_pool2d(p, 3, 2, 1)
        p = F.interpolate(p, size=(8, 8), mode="bilinear", align_corners=False)
        r = torch.flip(torch.roll(x, shifts=(2, -1), dims=(2, 3)), dims=(3,))
        y = p + r
        cols = F.unfold(y, kernel_size=2, stride=2)  # (1, 16, 16)
        tokens = cols.transpose(1, 2)
        tokens = torch.cat([self.token.expand(1, -1, -1), tokens], dim=1)
        a, b = tokens.chunk(2, dim=-1)
        t = a * torch.sigmoid(b)
        t = t.repeat_interleave(2, dim=-1)
        first = t[:, 0]
        rest = t[:, torch.tensor([1, 3, 5, 7])]
        return F.adaptive_avg_pool2d(y, 2).flatten(1).sum(-1, keepdim=True) + \
            rest.mean(1) + first


def test_shape_ops():
    _check(Shapes(), (1, 4, 8, 8))


class Attention(nn.Module):
    """A decoder block: embedding of token ids, RMSNorm, rotary embeddings, causal
    grouped-query attention (SDPA), SwiGLU, tied-free head; a forward with optional args."""

    def __init__(self, vocab: int = 50, dim: int = 32, heads: int = 4, kv_heads: int = 2):
        super().__init__()
        self.heads, self.kv_heads, self.dim = heads, kv_heads, dim
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.RMSNorm(dim, eps=1e-6)
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, 2 * dim * kv_heads // heads, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.gate = nn.Linear(dim, 64, bias=False)
        self.up = nn.Linear(dim, 64, bias=False)
        self.down = nn.Linear(64, dim, bias=False)
        self.head = nn.Linear(dim, vocab)

    def rope(self, t):
        d = t.shape[-1]
        pos = torch.arange(t.shape[-2], dtype=torch.float32)
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        ang = torch.outer(pos, inv)
        cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
        rot = torch.cat([-t[..., d // 2:], t[..., :d // 2]], dim=-1)
        return t * cos + rot * sin

    def forward(self, ids, attention_mask=None, use_cache: bool = False):
        x = self.embed(ids)
        n, L, _ = x.shape
        hd = self.dim // self.heads
        h = self.norm(x)
        q = self.q(h).view(n, L, self.heads, hd).transpose(1, 2)
        k, v = self.kv(h).view(n, L, 2, self.kv_heads, hd).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        q, k = self.rope(q), self.rope(k)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(n, L, self.dim))
        h = self.norm(x)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        return self.head(x)


def test_decoder_block_from_token_ids():
    ids = torch.randint(0, 50, (1, 12), generator=torch.Generator().manual_seed(0))
    graph, _ = _check(Attention(), ids.shape, example=[ids])
    embed = graph.ops[0]
    assert (embed.kind, embed.op_type, embed.weight_elems) == (OpKind.LINEAR, "embedding",
                                                               50 * 32)
    assert graph.count(OpKind.MATMUL) == 2 and graph.count(OpKind.SOFTMAX) == 1


class Masked(nn.Module):
    """masked_fill with a constant mask, where, layer and group norms, GELU (tanh)."""

    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(8)
        self.gn = nn.GroupNorm(2, 4)
        self.register_buffer("mask", torch.ones(6, 6, dtype=torch.bool).tril())

    def forward(self, x):  # (1, 4, 6, 8)
        y = self.gn(x)
        y = self.ln(y)
        s = y @ y.transpose(-1, -2) / math.sqrt(8)
        s = s.masked_fill(~self.mask, float("-inf")).softmax(-1)
        z = torch.where(self.mask, s, torch.zeros(()))
        return F.gelu(z @ y, approximate="tanh")


def test_masks_and_norms():
    _check(Masked(), (1, 4, 6, 8))


class Unknown(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1) + 1


def test_unknown_op_refused_by_name_in_one_line():
    with pytest.raises(UnsupportedOpError) as err:
        from_export(Unknown(), (1, 4))
    text = str(err.value)
    assert "\n" not in text and "aten.cumsum" in text and "--allow-opaque" in text
    with pytest.warns(UserWarning, match="opaque"):
        graph = from_export(Unknown(), (1, 4), allow_opaque=True)
    assert graph.count(OpKind.OPAQUE) == 1


class NoExport(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow: torch.export cannot export it
            return x * 2
        return x


def test_an_unexportable_model_is_one_line():
    with pytest.raises(UnsupportedOpError, match="torch.export cannot export") as err:
        from_export(NoExport(), (1, 4))
    assert "\n" not in str(err.value)


def test_cli_loads_module_callables_through_export(cli, tmp_path, monkeypatch):
    (tmp_path / "usermodels.py").write_text(
        "import torch\n"
        "from torch import nn\n"
        "import torch.nn.functional as F\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv = nn.Conv2d(3, 8, 3, padding=1)\n"
        "        self.bn = nn.BatchNorm2d(8)\n"
        "    def forward(self, x, scale=None):\n"
        "        y = F.batch_norm(self.conv(x), self.bn.running_mean, self.bn.running_var,\n"
        "                         self.bn.weight, self.bn.bias)\n"
        "        return y.mean(dim=1)\n"
        "class Bad(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.cumsum(x, 1)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = cli("inspect", "usermodels:Net", "--input-shape", "1,3,16,16",
                         "--format", "json")
    assert code == 0, err
    g = ComputeGraph.from_json(out)
    assert [op.kind for op in g.ops][:1] == [OpKind.CONV]
    code, out, err = cli("inspect", "usermodels:Bad", "--input-shape", "1,3,16,16")
    assert code == 2 and "aten.cumsum" in err and len(err.strip().splitlines()) == 1


def test_coverage_table_lists_every_mapped_aten_op_once():
    from simulator.workload.coverage import markdown
    from simulator.workload.export_import import ATEN_TABLE, COVERAGE

    names = [n for row in COVERAGE for n in row[0]]
    assert sorted(names) == sorted(set(names)) == list(ATEN_TABLE)
    assert "## torch: `from_export`" in markdown()

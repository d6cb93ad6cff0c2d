"""The benchmark workloads, one definition for every device.

Takes: a device ("cpu" or "cuda"). Gives: ``WORKLOADS``, a list of ``Workload``;
``workload.build(device)`` returns a ``Case``: the eager function to compile,
a ``make_inputs(seed)`` that returns fresh arguments, a ``step`` that runs one
call (for the training step: forward, backward, gradients), the bytes that must
move (inputs read once, outputs and in-place updates written once) and a
one-line description of the shapes.

Sizes are per device: CPU sizes run in a few milliseconds on a 2-core machine;
GPU sizes are the ones of the project's GPU goals (64M fp32 sin²+cos², 10000×13000
int chain, 8192² fp32 transpose and column sum, bf16 16384×4096 LayerNorm).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree


@dataclass
class Case:
    fn: Callable                      # the eager function; compiled as is by Inductor and braze
    make_inputs: Callable[[int], tuple]
    shape: str
    step: Callable | None = None      # step(fn, args) -> result; default fn(*args)
    bytes_moved: int | None = None    # None: inputs + outputs, computed from one eager call
    no_gbs: bool = False              # matmul-bound: GB/s means nothing
    mutates: bool = False             # compare the arguments after the call, too
    reference: Callable | None = None  # random draws: reference(args, result) -> eager's result for the
                                       # compiled call's own draws (default: eager's own call)

    def run(self, fn, args):
        return self.step(fn, args) if self.step else fn(*args)


@dataclass
class Workload:
    name: str
    build_case: Callable              # (device, **size) -> Case
    sizes: dict = field(default_factory=dict)  # device type -> keyword sizes
    note: str = ""

    def build(self, device: str) -> Case:
        return self.build_case(device, **self.sizes[torch.device(device).type])


WORKLOADS: list[Workload] = []


def workload(name: str, cpu: dict, cuda: dict, note: str = ""):
    def register(build_case):
        WORKLOADS.append(Workload(name, build_case, {"cpu": cpu, "cuda": cuda}, note))
        return build_case
    return register


def by_name(name: str) -> Workload:
    for w in WORKLOADS:
        if w.name == name:
            return w
    raise KeyError(f"no workload {name!r}; known: {', '.join(w.name for w in WORKLOADS)}")


def tensor_bytes(tree) -> int:
    return sum(t.numel() * t.element_size() for t in pytree.tree_leaves(tree) if isinstance(t, torch.Tensor))


def _randn(shape, device, dtype=torch.float32, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(shape, device=device, dtype=dtype, generator=g)


def _dims(shape) -> str:
    return "×".join(str(s) for s in shape)


def _dt(dtype) -> str:
    return str(dtype).replace("torch.", "").replace("float", "fp").replace("bfp16", "bf16")


# --- pointwise -------------------------------------------------------------------

@workload("sin²+cos²", cpu=dict(n=1 << 22), cuda=dict(n=1 << 26))
def sin2_cos2(device, n):
    def fn(x):
        return torch.sin(x) ** 2 + torch.cos(x) ** 2
    return Case(fn, lambda s: (_randn(n, device, seed=s),), f"{n // (1 << 20)}M fp32")


@workload("add+relu", cpu=dict(shape=(2, 32, 128, 512)), cuda=dict(shape=(2, 32, 128, 512)))
def add_relu(device, shape):
    def fn(x, y):
        return torch.relu(x + y)
    return Case(fn, lambda s: (_randn(shape, device, seed=s), _randn(shape, device, seed=s + 1000)),
                f"{_dims(shape)} fp32")


@workload("int cast chain", cpu=dict(shape=(1000, 1300)), cuda=dict(shape=(10000, 13000)))
def int_chain(device, shape):
    def fn(a, b, c):
        return ((a.to(torch.int32) + b) * c).to(torch.int64)

    def make(s):
        g = torch.Generator(device=device).manual_seed(s)
        a = torch.randint(-1000, 1000, shape, device=device, generator=g)
        b = torch.randint(-1000, 1000, shape, device=device, generator=g)
        c = torch.randint(-1000, 1000, shape, device=device, generator=g, dtype=torch.int32)
        return a, b, c
    return Case(fn, make, f"{_dims(shape)} i64,i64,i32")


@workload("remainder, floor, select", cpu=dict(n=1 << 22), cuda=dict(n=1 << 26),
          note="Python-style float remainder and floor division, floor, a division under a select")
def rounding(device, n):
    def fn(x):
        return torch.remainder(x, 7.0) + torch.div(x, 3.0, rounding_mode="floor") + torch.where(x > 0, x / 3, x.floor())
    return Case(fn, lambda s: (_randn(n, device, seed=s) * 100,), f"{n // (1 << 20)}M fp32")


# --- row reductions -----------------------------------------------------------------

@workload("RMSNorm (manual)", cpu=dict(shape=(4096, 1024), dtype=torch.float32),
          cuda=dict(shape=(16384, 4096), dtype=torch.bfloat16))
def rmsnorm(device, shape, dtype):
    def fn(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    return Case(fn, lambda s: (_randn(shape, device, dtype, s), _randn(shape[-1:], device, dtype, s + 1)),
                f"{_dims(shape)} {_dt(dtype)}")


@workload("LayerNorm+GELU", cpu=dict(shape=(4096, 1024), dtype=torch.float32),
          cuda=dict(shape=(16384, 4096), dtype=torch.bfloat16))
def layernorm_gelu(device, shape, dtype):
    def fn(x, w, b):
        return F.gelu(F.layer_norm(x, shape[-1:], w, b))
    d = shape[-1:]
    return Case(fn, lambda s: (_randn(shape, device, dtype, s), _randn(d, device, dtype, s + 1),
                               _randn(d, device, dtype, s + 2)), f"{_dims(shape)} {_dt(dtype)}")


@workload("softmax", cpu=dict(shape=(4096, 1024)), cuda=dict(shape=(16384, 4096)))
def softmax(device, shape):
    def fn(x):
        return torch.softmax(x, dim=-1)
    return Case(fn, lambda s: (_randn(shape, device, seed=s),), f"{_dims(shape)} fp32")


@workload("bias+residual+LayerNorm", cpu=dict(shape=(4096, 1024)), cuda=dict(shape=(16384, 4096)))
def bias_residual_layernorm(device, shape):
    dtype, d = torch.bfloat16, shape[-1:]

    def fn(x, bias, residual, w, b):
        h = x + bias + residual
        return F.layer_norm(h, d, w, b), h

    def make(s):
        return (_randn(shape, device, dtype, s), _randn(d, device, dtype, s + 1),
                _randn(shape, device, dtype, s + 2), _randn(d, device, dtype, s + 3),
                _randn(d, device, dtype, s + 4))
    return Case(fn, make, f"{_dims(shape)} bf16, returns (norm, sum)")


@workload("dropout+residual+LayerNorm", cpu=dict(shape=(4096, 1024)), cuda=dict(shape=(16384, 4096)),
          note="training-mode dropout (p 0.1) of x + bias, added to the residual, then LayerNorm: the "
               "random numbers differ from eager's; checked against eager given the compiled call's mask")
def dropout_residual_layernorm(device, shape):
    dtype, d, p = torch.bfloat16, shape[-1:], 0.1

    def fn(x, bias, residual, w, b):
        h = residual + F.dropout(x + bias, p, training=True)
        return F.layer_norm(h, d, w, b), h

    def reference(args, result):
        """Eager's result with the compiled call's mask: an element was dropped where its sum
        is the residual (a kept one that rounds to it gives the same value either way)."""
        x, bias, residual, w, b = args
        kept = result[1] != residual
        dropped = 1 - kept.double().mean().item()
        if abs(dropped - p) > 0.01:
            raise AssertionError(f"dropped {dropped:.4f} of the elements, not about {p}")
        h = residual + torch.where(kept, (x + bias) * (1 / (1 - p)), 0)
        return F.layer_norm(h, d, w, b), h

    def make(s):
        return (_randn(shape, device, dtype, s), _randn(d, device, dtype, s + 1),
                _randn(shape, device, dtype, s + 2), _randn(d, device, dtype, s + 3),
                _randn(d, device, dtype, s + 4))
    return Case(fn, make, f"{_dims(shape)} bf16, p 0.1, returns (norm, sum)", reference=reference)


@workload("cross-entropy 32k vocab", cpu=dict(rows=256, vocab=32000), cuda=dict(rows=8192, vocab=32000))
def cross_entropy(device, rows, vocab):
    def fn(logits, target):
        return F.cross_entropy(logits, target)

    def make(s):
        g = torch.Generator(device=device).manual_seed(s + 7)
        return _randn((rows, vocab), device, seed=s), torch.randint(0, vocab, (rows,), device=device, generator=g)
    return Case(fn, make, f"{rows}×{vocab} fp32 logits, mean loss")


# --- pointwise with views -----------------------------------------------------------

@workload("SwiGLU", cpu=dict(rows=4096, hidden=1024, dtype=torch.float32),
          cuda=dict(rows=8192, hidden=8192, dtype=torch.bfloat16))
def swiglu(device, rows, hidden, dtype):
    def fn(x):
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up
    return Case(fn, lambda s: (_randn((rows, 2 * hidden), device, dtype, s),),
                f"{rows}×{2 * hidden} {_dt(dtype)} -> chunk, silu(a)*b")


@workload("rotary embedding", cpu=dict(shape=(1, 16, 1024, 128), dtype=torch.float32),
          cuda=dict(shape=(4, 32, 4096, 128), dtype=torch.bfloat16))
def rotary(device, shape, dtype):
    seq, dim = shape[-2], shape[-1]

    def fn(x, cos, sin):
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def make(s):
        x = _randn(shape, device, dtype, s)
        pos = torch.arange(seq, device=device, dtype=torch.float32)[:, None]
        freq = 10000.0 ** (-torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim)
        angles = torch.cat([pos * freq, pos * freq], dim=-1)
        return x, angles.cos().to(dtype), angles.sin().to(dtype)
    return Case(fn, make, f"{_dims(shape)} {_dt(dtype)}, cos/sin {seq}×{dim}")


@workload("transpose+add", cpu=dict(n=2048), cuda=dict(n=8192))
def transpose_add(device, n):
    def fn(x, y):
        return x.t() + y
    return Case(fn, lambda s: (_randn((n, n), device, seed=s), _randn((n, n), device, seed=s + 1)),
                f"{n}² fp32")


@workload("column sum", cpu=dict(n=2048), cuda=dict(n=8192))
def column_sum(device, n):
    def fn(x):
        return x.sum(dim=0)
    return Case(fn, lambda s: (_randn((n, n), device, seed=s),), f"{n}² fp32 -> {n}")


# --- scatters and scans -----------------------------------------------------------------

@workload("embedding backward", cpu=dict(vocab=8192, hidden=256, tokens=4096),
          cuda=dict(vocab=30522, hidden=768, tokens=4096))
def embedding_backward(device, vocab, hidden, tokens):
    """The weight gradient of an embedding lookup: rows of the output gradient added into
    the rows their token ids name (an accumulating ``index_put`` into zeros)."""
    def fn(grad, ids):
        return torch.ops.aten.embedding_dense_backward(grad, ids, vocab, -1, False)

    def make(s):
        g = torch.Generator(device=device).manual_seed(s + 11)
        return _randn((tokens, hidden), device, seed=s), torch.randint(0, vocab, (tokens,), device=device, generator=g)
    return Case(fn, make, f"{tokens} ids × {hidden} fp32 into {vocab} rows")


@workload("exp+cumsum", cpu=dict(shape=(2048, 1024)), cuda=dict(shape=(8192, 4096)))
def exp_cumsum(device, shape):
    def fn(x):
        return x.exp().cumsum(1)
    return Case(fn, lambda s: (_randn(shape, device, seed=s),), f"{_dims(shape)} fp32, along rows")


# --- optimizer and training -----------------------------------------------------------

def adam_update(params, grads, exp_avgs, exp_avg_sqs, step, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
    """One Adam step written with torch ops, updating in place (the math of
    ``torch.optim.Adam(foreach=False, capturable=True)`` without weight decay;
    ``step`` is a 0-d float tensor, so the compiled graph does not change with it)."""
    step.add_(1)
    bias_correction1 = 1 - beta1 ** step
    bias_correction2_sqrt = (1 - beta2 ** step).sqrt()
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        denom = v.sqrt() / bias_correction2_sqrt + eps
        p.sub_(lr * (m / bias_correction1) / denom)


_ADAM_SHAPES = [(1024, 256), (256,), (256, 1024), (1024,)]  # per-layer weights and biases, cycled


@workload("Adam step, 32 tensors", cpu=dict(scale=1), cuda=dict(scale=4),
          note="functional Adam written with torch ops (adam_update), in place, step as a 0-d tensor")
def adam(device, scale):
    shapes = [tuple(d * scale for d in _ADAM_SHAPES[k % 4]) for k in range(32)]

    def make(s):
        lists = [[_randn(sh, device, seed=s * 1000 + 4 * k + j).abs_() if j == 3 else
                  _randn(sh, device, seed=s * 1000 + 4 * k + j) for k, sh in enumerate(shapes)]
                 for j in range(4)]
        return (*lists, torch.tensor(10.0, device=device))
    numel = sum(math.prod(sh) for sh in shapes)
    return Case(adam_update, make, f"32 tensors, {numel / 1e6:.1f}M fp32 params",
                bytes_moved=numel * 4 * 7, mutates=True)  # read p, g, m, v; write p, m, v


@workload("MLP training step", cpu=dict(batch=256, dims=(512, 1024, 1024, 10)),
          cuda=dict(batch=8192, dims=(1024, 4096, 4096, 10)),
          note="forward+backward of (Linear-LayerNorm-GELU)×2, Linear, cross-entropy; grads set to None each step")
def mlp_train(device, batch, dims):
    torch.manual_seed(0)
    layers = []
    for k, (a, b) in enumerate(zip(dims, dims[1:])):
        layers.append(torch.nn.Linear(a, b))
        if k < len(dims) - 2:
            layers += [torch.nn.LayerNorm(b), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).to(device)
    params = list(model.parameters())

    def fn(x, target):
        return F.cross_entropy(model(x), target)

    def step(f, args):
        for p in params:
            p.grad = None
        loss = f(*args)
        loss.backward()
        return loss.detach(), [p.grad for p in params]

    def make(s):
        g = torch.Generator(device=device).manual_seed(s + 3)
        target = torch.randint(0, dims[-1], (batch,), device=device, generator=g)
        return _randn((batch, dims[0]), device, seed=s), target
    return Case(fn, make, f"batch {batch}, {'-'.join(map(str, dims))}, LayerNorm+GELU", step=step, no_gbs=True)

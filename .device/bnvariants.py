"""Variants of braze's looped Welford kernels for BatchNorm statistics (var_mean over N, H, W of NCHW fp32 at
ResNet-50's batch-64 shapes), timed in one process beside Inductor: the kernel text as built, its loads of
the loop with eviction_policy='evict_first' (as Inductor's), masked lanes loaded as 0 (other=0.0) instead of
a select, both, and loop chunks (LOOP_RBLOCK) of 1024 and 4096. python .device/bnvariants.py"""
import re
import sys

import torch
import triton

sys.path.insert(0, ".")
import braze
from braze.codegen.triton import kernel as tkernel, shapes

BUILT_SOURCE = tkernel.TritonKernel.source
BUILT_RBLOCK = shapes.LOOP_RBLOCK


def evict(text):
    return "\n".join(re.sub(r"(tl\.load\(.*rmask[^()]*)\)$", r"\1, eviction_policy='evict_first')", line)
                     for line in text.splitlines())


def zero_other(text):
    text = "\n".join(re.sub(r"(tl\.load\(.*rmask[^()]*)\)$", r"\1, other=0.0)", line) for line in text.splitlines())
    return re.sub(r"tl\.where\(rmask, (tmp\d+), 0\.0\)", r"\1", text)


VARIANTS = {"built": (lambda t: t, BUILT_RBLOCK), "evict": (evict, BUILT_RBLOCK),
            "other0": (zero_other, BUILT_RBLOCK), "both": (lambda t: evict(zero_other(t)), BUILT_RBLOCK),
            "r1024": (lambda t: t, 1024), "r4096": (lambda t: t, 4096),
            "both4096": (lambda t: evict(zero_other(t)), 4096)}


def var_mean(x):
    return torch.var_mean(x, dim=(0, 2, 3), correction=0)


def bn_train(x, w, b):
    return torch.nn.functional.batch_norm(x, None, None, w, b, training=True)


for shape in ((64, 256, 56, 56), (64, 512, 28, 28), (64, 1024, 14, 14), (64, 64, 112, 112)):
    x = torch.randn(shape, device="cuda")
    w, b = torch.randn(shape[1], device="cuda"), torch.randn(shape[1], device="cuda")
    for fname, fn, args in (("var_mean", var_mean, (x,)), ("bn_train", bn_train, (x, w, b))):
        if fname == "bn_train" and shape[1] != 256:
            continue
        torch._dynamo.reset()
        ind = torch.compile(fn)
        ind(*args)
        line = [f"inductor {triton.testing.do_bench(lambda: ind(*args), rep=200) * 1e3:6.1f}"]
        expected = fn(*args)
        for name, (transform, rblock) in VARIANTS.items():
            tkernel.TritonKernel.source = lambda self, n, t=transform: t(BUILT_SOURCE(self, n))
            shapes.LOOP_RBLOCK = rblock
            torch._dynamo.reset()
            with braze.config.patch(graph_cache=False):
                f = torch.compile(fn, backend="braze")
                got = f(*args)
            ok = all(torch.allclose(g, e, rtol=1e-4, atol=1e-4) for g, e in zip(got, expected))
            line.append(f"{name} {triton.testing.do_bench(lambda: f(*args), rep=200) * 1e3:6.1f}{'' if ok else ' WRONG'}")
        tkernel.TritonKernel.source, shapes.LOOP_RBLOCK = BUILT_SOURCE, BUILT_RBLOCK
        print(f"{fname} {shape}: " + " | ".join(line), flush=True)

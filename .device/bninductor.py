"""How Inductor computes BatchNorm statistics (var_mean over N, H, W of NCHW fp32, ResNet-50's shapes at batch
64) against braze: each compiler's time (do_bench median), and Inductor's kernels with the launch
configuration its autotuner chose and the loop lines of their source. python .device/bninductor.py"""
import inspect
import os

import torch
import triton
import braze  # noqa: F401
from torch._inductor.codecache import PyCodeCache

os.environ.setdefault("BRAZE_DEBUG_DIR", "/tmp/bninductor")


def var_mean(x):
    return torch.var_mean(x, dim=(0, 2, 3), correction=0)


seen = set()
for shape in ((64, 256, 56, 56), (64, 512, 28, 28), (64, 1024, 14, 14), (64, 64, 112, 112)):
    x = torch.randn(shape, device="cuda")
    torch._dynamo.reset()
    times = {}
    for label, f in (("inductor", torch.compile(var_mean)), ("braze", torch.compile(var_mean, backend="braze"))):
        f(x)
        times[label] = triton.testing.do_bench(lambda: f(x), rep=200) * 1e3
    print(f"== {shape}: inductor {times['inductor']:.1f} us, braze {times['braze']:.1f} us, "
          f"read at copy rate {x.numel() * 4 / 3.0e6:.1f} us")
    for mod in PyCodeCache.modules:
        for name, obj in vars(mod).items():
            if not hasattr(obj, "launchers") or id(obj) in seen or not obj.launchers:
                continue
            seen.add(id(obj))
            cfg = obj.launchers[0].config
            print(f"   {name}: {cfg.kwargs} warps {cfg.num_warps} stages {cfg.num_stages} "
                  f"regs {getattr(obj.launchers[0], 'n_regs', '?')}")
            src = getattr(obj.fn, "src", None) or inspect.getsource(obj.fn.fn)
            for line in src.splitlines():
                s = line.strip()
                if s.startswith(("xnumel", "r0_numel", "rnumel", "for ", "tmp0 = tl.load", "x0 =", "x1 =",
                                 "r0_1 =", "r0_2 =", "r1 =", "r2 =", "xoffset", "tl.store")):
                    print("      " + s[:150])
for root, _, files in sorted(os.walk(os.environ["BRAZE_DEBUG_DIR"])):
    if "source.txt" in files:
        for line in open(os.path.join(root, "source.txt")):
            if line.strip().startswith('"""kernel'):
                print(f"braze {os.path.basename(root)}: {line.strip()[3:120]}")

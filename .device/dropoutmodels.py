"""Training steps of models with dropout on (p 0.1 on the hidden dropouts, attention dropout left 0):
eager, Inductor and braze side by side (do_bench median, ms), braze's fallbacks and kernels, and the
loss of each (differs by the random masks, so only roughly equal).
python .device/dropoutmodels.py gpt2,bert"""
import sys
import time

import torch
import triton.testing

sys.path.insert(0, ".")
import braze  # noqa: E402
from benchmarks import model_zoo  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
for name in sys.argv[1].split(","):
    case = model_zoo.case(name, False)
    model = model_zoo.build(case, "cuda")
    for module_name, m in model.named_modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0 if ("attn" in module_name or "attention.self" in module_name) else 0.1
    dropouts = sum(1 for m in model.modules() if isinstance(m, torch.nn.Dropout) and m.p > 0)
    step = model_zoo.Step(case, model, "train", "cuda")
    fns = {"eager": model}
    results = {}
    with braze.backend.Recording() as rec:
        for label, make in (("inductor", lambda: torch.compile(model)),
                            ("braze", lambda: torch.compile(model, backend="braze"))):
            start = time.perf_counter()
            fns[label] = make()
            step(fns[label])
            torch.cuda.synchronize()
            results[label] = {"compile": time.perf_counter() - start}
    kernels = sum(len(g.kernels) for g in rec.graphs)
    fallbacks = [f for g in rec.graphs for f in g.fallbacks]
    times = {k: [] for k in fns}
    for _ in range(3):
        for label, f in fns.items():
            times[label].append(triton.testing.do_bench(lambda: step(f), warmup=5, rep=200))
    losses = {label: step(f)[1].item() for label, f in fns.items()}
    line = ", ".join(f"{label} {sorted(t)[1]:.2f} ms (loss {losses[label]:.4f})" for label, t in times.items())
    print(f"== {name} train, {dropouts} dropouts p 0.1: {line}; compile inductor "
          f"{results['inductor']['compile']:.1f} s, braze {results['braze']['compile']:.1f} s; braze "
          f"{kernels} kernels, fallbacks {sorted(set(fallbacks)) or 0}", flush=True)

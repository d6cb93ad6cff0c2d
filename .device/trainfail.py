"""The forward graph of a model's training step compiled strictly on the GPU: the innermost traceback of a
failure, and the failing ATen graph's code with its inputs' metadata written to $OUT.
python .device/trainfail.py gpt2"""
import os, sys, traceback
sys.path.insert(0, ".")
import torch, braze
import braze.backend
from benchmarks import model_zoo
real = braze.backend.compile_graph
def keeping(gm, kind, *a, **k):
    try:
        return real(gm, kind, *a, **k)
    except Exception:
        with open(os.path.join(os.environ.get("OUT", "/tmp"), f"failed_{kind}.py"), "w") as f:
            f.write(gm.code + "\n# inputs\n")
            for n in gm.graph.find_nodes(op="placeholder"):
                v = n.meta.get("val")
                f.write(f"# {n.name}: {tuple(v.shape)} {v.stride()} {v.dtype}\n" if isinstance(v, torch.Tensor) else f"# {n.name}: {v!r}\n")
        traceback.print_exc()
        raise
braze.backend.compile_graph = keeping
case = model_zoo.case(sys.argv[1], False)
model = model_zoo.build(case, "cuda")
step = model_zoo.Step(case, model, "train", "cuda")
step(model)
try:
    with braze.config.patch(strict=True):
        step(torch.compile(model, backend="braze"))
    print("ok")
except Exception as e:
    print("failed:", type(e).__name__)

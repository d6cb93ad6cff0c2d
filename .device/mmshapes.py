"""Matrix products of one model step per compiler: op, input dims and strides, counted (from the
profiler's trace with record_shapes): python mmshapes.py MODEL MODE."""
import collections, json, sys, tempfile, torch
sys.path.insert(0, ".")
import braze
from benchmarks import model_zoo
from torch.profiler import profile, ProfilerActivity
name, mode = sys.argv[1], sys.argv[2]
case = model_zoo.case(name, False)
model = model_zoo.build(case, "cuda")
step = model_zoo.Step(case, model, mode, "cuda")
seen = {}
for compiler in ("inductor", "braze"):
    torch._dynamo.reset()
    fn = torch.compile(model, backend="braze") if compiler == "braze" else torch.compile(model)
    for _ in range(2): step(fn)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        step(fn); torch.cuda.synchronize()
    path = tempfile.mktemp(suffix=".json"); prof.export_chrome_trace(path)
    events = json.load(open(path))["traceEvents"]
    c = collections.Counter()
    for e in events:
        if e.get("cat") == "cpu_op" and e["name"] in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"):
            a = e.get("args", {})
            c[(e["name"], str(a.get("Input Dims")), str(a.get("Input Strides")))] += 1
    seen[compiler] = c
keys = set(seen["inductor"]) | set(seen["braze"])
print(f"== {name} {mode}: count inductor / braze, op, dims, strides")
for k in sorted(keys):
    i, b = seen["inductor"][k], seen["braze"][k]
    mark = "   " if i == b else "<> "
    print(f"{mark}{i:3d} {b:3d} {k[0]} {k[1]} {k[2]}")

"""Host time of one inference call per compiler: calls issued without sync, then a cProfile of
30 calls (top functions by own time): python hostprof.py MODEL braze,inductor"""
import cProfile, pstats, io, sys, time, torch
sys.path.insert(0, ".")
import braze
from benchmarks import model_zoo
name = sys.argv[1]
case = model_zoo.case(name, False)
model = model_zoo.build(case, "cuda")
step = model_zoo.Step(case, model, "infer", "cuda")
for compiler in sys.argv[2].split(","):
    torch._dynamo.reset()
    fn = model if compiler == "eager" else (torch.compile(model, backend="braze") if compiler == "braze" else torch.compile(model))
    for _ in range(5): step(fn)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(30): step(fn)
    host = (time.perf_counter() - t) / 30 * 1e3
    torch.cuda.synchronize()
    pr = cProfile.Profile(); pr.enable()
    for _ in range(30): step(fn)
    pr.disable(); torch.cuda.synchronize()
    s = io.StringIO(); st = pstats.Stats(pr, stream=s); st.sort_stats("tottime").print_stats(22)
    print(f"===== {name} infer {compiler}: host {host:.2f} ms per call")
    print("\n".join(l[:170] for l in s.getvalue().splitlines()[6:40]))
    s = io.StringIO(); st = pstats.Stats(pr, stream=s); st.sort_stats("cumulative").print_stats(0)
    print("\n".join(l[:170] for l in s.getvalue().splitlines()[6:42]))

"""GPU time of each kernel of a benchmark workload (CUDA sizes), eager, Inductor and braze, from the
torch profiler: which kernel of a row holds it below the copy rate.
python .device/wlprof.py "cross-entropy 32k vocab" "embedding backward" ..."""
import sys, collections, torch
sys.path.insert(0, ".")
import braze  # noqa: F401
from benchmarks import workloads as W
from torch.profiler import profile, ProfilerActivity

CALLS = 20


def kernel_times(case, fn, args):
    for _ in range(3):
        case.run(fn, args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            case.run(fn, args)
        torch.cuda.synchronize()
    per, count = collections.Counter(), collections.Counter()
    for e in prof.events():
        if e.device_type.name == "CUDA":
            per[e.name[:100]] += e.device_time_total / CALLS
            count[e.name[:100]] += 1
    return per, count


for name in sys.argv[1:]:
    w = W.by_name(name)
    case = w.build_case("cuda", **w.sizes["cuda"])
    args = case.make_inputs(0)
    fns = {"eager": case.fn, "inductor": torch.compile(case.fn), "braze": torch.compile(case.fn, backend="braze")}
    for label, fn in fns.items():
        per, count = kernel_times(case, fn, args)
        print(f"== {name} {label}: {sum(per.values()):.1f} us per call over {sum(count.values()) // CALLS} kernels")
        for k, v in per.most_common(8):
            print(f"   {v:8.1f} us  x{count[k] // CALLS:3d}  {k}")
    sys.stdout.flush()

"""Division of float32 by a Python number on CUDA: braze against eager over every float32 bit pattern
(2^32 values, in chunks of 2^28), for true, trunc and floor division and the benchmark's rounding row;
then rsqrt and x ** -0.5 (eager's CUDA rsqrt, libdevice's in braze) and x / 4096 as a tensor division.
Prints, per divisor and op, how many results differ bit for bit (NaN equal to NaN) and the first few.
python .device/divexhaust.py"""
import torch
import braze  # noqa: F401  (registers the backend)

DIVISORS = (3.0, 7.0, -3.0, 0.1, 1.5, 10.0, 1e-30, 3e38)
OPS = {"true": lambda x, b: x / b, "trunc": lambda x, b: torch.div(x, b, rounding_mode="trunc"),
       "floor": lambda x, b: torch.div(x, b, rounding_mode="floor")}
CHUNK = 1 << 28


def rounding_row(x, b):  # benchmarks.workloads' "remainder, floor, select" (b unused)
    return torch.remainder(x, 7.0) + torch.div(x, 3.0, rounding_mode="floor") + torch.where(x > 0, x / 3, x.floor())


def differing(fn):
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="braze", dynamic=False)
    count, examples = 0, []
    for start in range(0, 1 << 32, CHUNK):
        x = (torch.arange(start, start + CHUNK, dtype=torch.int64, device="cuda") - (1 << 31)).to(torch.int32).view(torch.float32)
        want, got = fn(x), compiled(x)
        same = (want.view(torch.int32) == got.view(torch.int32)) | (want.isnan() & got.isnan())
        bad = (~same).nonzero().flatten()
        count += bad.numel()
        examples += [(x[k].item(), got[k].item(), want[k].item()) for k in bad[:3 - len(examples)].tolist()]
    return count, examples


total = 0
for b in DIVISORS:
    for name, op in OPS.items():
        count, examples = differing(lambda x: op(x, b))
        total += count
        print(f"b={b!r:8} {name:6} differing {count}" + (f"  e.g. (x, braze, eager) {examples}" if count else ""), flush=True)
count, examples = differing(lambda x: rounding_row(x, None))
print(f"rounding row: differing {count}" + (f"  e.g. {examples}" if count else ""))
total += count
for name, fn in (("rsqrt", torch.rsqrt), ("x ** -0.5", lambda x: x ** -0.5),
                 ("x / full(4096)", lambda x: x / torch.full((), 4096.0, device="cuda"))):
    count, examples = differing(fn)
    total += count
    print(f"{name}: differing {count}" + (f"  e.g. {examples}" if count else ""), flush=True)
print("TOTAL differing", total)

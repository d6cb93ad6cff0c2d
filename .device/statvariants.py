"""Variants of braze's statistics code on the GPU, timed side by side in one process with Inductor:
- Welford's merge (``welford_combine``, also each element's step in split and looped reductions) with
  the weight n_b / n as an IEEE division (as built), Triton's '/' (div.full.f32) or fast_dividef;
- a row kernel's variance (``rows._moments``) as built (mean from one sum, then the sum of squared
  deviations: Inductor's persistent Welford) or with the mean's correction (braze before e35bb4a; the
  first run of this script, at a006d02, had them the other way round: built corrected, variant plain).
Workloads: ResNet-50's BatchNorm statistics (var_mean over N, H, W at batch 64), BatchNorm backward's two
sums, a BatchNorm training forward, and the row benchmarks' cases. Prints us and % of the copy's rate per
variant (``none``: braze as built only; ``bn``: the same, BatchNorm cases only).
python .device/statvariants.py [welford|moments|all|none|bn]"""
import sys
import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, ".")
import braze
from braze.codegen.triton import helpers, rows
from benchmarks import workloads
from benchmarks.measure import copy_bandwidth

WELFORD = helpers._HELPERS["welford_combine"]
DIVISIONS = {"rn": "true_div(n_b, tl.where(n == 0, 1.0, n))",
             "slash": "n_b / tl.where(n == 0, 1.0, n)",
             "fast": "libdevice.fast_dividef(n_b, tl.where(n == 0, 1.0, n))"}
BUILT_MOMENTS = rows._moments


def welford_variant(name):
    deps, text = WELFORD
    helpers._HELPERS["welford_combine"] = (deps, text.replace(DIVISIONS["rn"], DIVISIONS[name]))


def corrected_moments(kernel, acc, member, printer):
    """The corrected two-pass variance braze used before commit e35bb4a: the deviations' sum s
    repairs the mean's rounding, mean + s / n and sum(d * d) - s * s / n."""
    value = printer(member.value)
    text = acc.element(printer.tensor(value, member.value.dtype), None)[0]
    dtype = acc.acc_dtype
    count = rows.literal(float(kernel.plan.reduce_numel()), dtype)
    total, = rows.tree_sums(kernel, [kernel._lanes(text, value.axes, "0.0")], printer.indent)
    rough = printer.temp(rows._divide(total, count, dtype), {"x"})
    centered = printer.temp(kernel._lanes(f"{text} - {rough.text}", value.axes | {"x"}, "0.0"), {"x", "r"})
    drift, squares = rows.tree_sums(kernel, [centered.text, f"{centered.text} * {centered.text}"], printer.indent)
    mean = printer.temp(f"{rough.text} + {rows._divide(drift, count, dtype)}", {"x"})
    m2 = printer.temp(f"{squares} - {drift} * {rows._divide(drift, count, dtype)}", {"x"})
    return [mean.text, m2.text, count]


def bn_stats(x):
    return torch.var_mean(x, dim=(0, 2, 3), correction=0, keepdim=True)


def bn_backward_sums(x, dy):
    return dy.sum((0, 2, 3)), (dy * x).sum((0, 2, 3))


def bn_train(x, w, b):
    return F.batch_norm(x, None, None, w, b, training=True)


def cases(rows=True):
    out = []
    for c, hw in ((64, 112), (64, 56), (256, 56), (128, 28), (512, 28), (1024, 14), (2048, 7)):
        x = torch.randn(64, c, hw, hw, device="cuda")
        out.append((f"var_mean 64x{c}x{hw}x{hw}", bn_stats, (x,)))
    x = torch.randn(64, 256, 56, 56, device="cuda").to(memory_format=torch.channels_last)
    out.append(("var_mean 64x256x56x56 channels-last", bn_stats, (x,)))
    for c, hw in ((64, 56), (256, 56), (512, 28), (1024, 14)):
        x, dy = torch.randn(64, c, hw, hw, device="cuda"), torch.randn(64, c, hw, hw, device="cuda")
        out.append((f"bn backward sums 64x{c}x{hw}x{hw}", bn_backward_sums, (x, dy)))
    x = torch.randn(64, 256, 56, 56, device="cuda")
    out.append(("batch_norm train 64x256x56x56", bn_train, (x, torch.randn(256, device="cuda"), torch.randn(256, device="cuda"))))
    for name in () if not rows else ("LayerNorm+GELU", "bias+residual+LayerNorm", "RMSNorm (manual)", "softmax"):
        case = workloads.by_name(name).build("cuda")
        out.append((name, case.fn, case.make_inputs(0)))
    return out


def nbytes(tree):
    return workloads.tensor_bytes(tree)


def time(fn, args):
    return do_bench(lambda: fn(*args), warmup=25, rep=200, return_mode="median") * 1e3


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    copy = copy_bandwidth("cuda")
    print(f"copy {copy:.0f} GB/s")
    variants = [("built", lambda: None)]
    if which in ("welford", "all"):
        variants += [(f"welford {d}", lambda d=d: welford_variant(d)) for d in ("slash", "fast")]
    if which in ("moments", "all"):
        variants += [("moments corrected", lambda: setattr(rows, "_moments", corrected_moments))]
    table = {}
    for label, fn, args in cases(rows=which != "bn"):
        moved = nbytes(args) + nbytes(fn(*args))
        torch._dynamo.reset()
        ind = torch.compile(fn)
        ref = fn(*args)
        ind(*args)
        row = {"inductor": time(ind, args)}
        for vname, apply in variants:
            helpers._HELPERS["welford_combine"] = WELFORD
            rows._moments = BUILT_MOMENTS
            apply()
            torch._dynamo.reset()
            with braze.config.patch(graph_cache=False):
                comp = torch.compile(fn, backend="braze")
                got = comp(*args)
            err = max((a.float() - b.float()).abs().max().item() for a, b in
                      zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(ref)))
            row[vname] = (time(comp, args), err)
        table[label] = (moved, row)
        cells = []
        for k, v in row.items():
            us, err = (v, None) if k == "inductor" else v
            pct = moved / (us * 1e-6) / 1e9 / copy * 100
            cells.append(f"{k} {us:.1f} us {pct:.0f}%" + ("" if err is None else f" err {err:.1e}"))
        print(f"{label}: " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()

"""Inductor's and braze's Triton code for a bf16 column var_mean (8192x8192) on the H100, with times.
python .device/varmeancode.py (Inductor's code: TORCH_LOGS=output_code)"""
import torch, triton
import braze
x = torch.randn(8192, 8192, device="cuda").to(torch.bfloat16)
fn = lambda x: torch.var_mean(x, 0)
f = torch.compile(fn)
f(x)
print("inductor us", triton.testing.do_bench(lambda: f(x)) * 1e3)
torch._dynamo.reset()
with braze.config.patch(graph_cache=False):
    report = braze.explain(fn, x)
    g = braze.compile(fn)
    g(x)
print("braze us", triton.testing.do_bench(lambda: g(x)) * 1e3)
print(report.graphs[0].source)

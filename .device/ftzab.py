"""libdevice with and without flush-to-zero (braze.config.libdevice_ftz) on the H100: braze's fmod and
remainder against torch's bit for bit over float32 pairs spanning the whole exponent range, subnormals included.
python .device/ftzab.py"""
import torch, braze

g = torch.Generator(device="cuda").manual_seed(0)
m = 1 << 24
a = torch.randn(m, device="cuda", generator=g) * torch.exp2(torch.randint(-150, 128, (m,), device="cuda", generator=g).float())
b = torch.randn(m, device="cuda", generator=g) * torch.exp2(torch.randint(-150, 128, (m,), device="cuda", generator=g).float())
close = torch.rand(m, device="cuda", generator=g) < 0.5
b = torch.where(close, a / torch.exp2(torch.randint(0, 20, (m,), device="cuda", generator=g).float()), b)
for ftz in (True, False):
    for name, fn in (("fmod", torch.fmod), ("remainder", torch.remainder)):
        torch._dynamo.reset()
        with braze.config.patch(libdevice_ftz=ftz, graph_cache=False):
            got = braze.compile(lambda a, b: fn(a, b))(a, b)
        want = fn(a, b)
        same = (got.view(torch.int32) == want.view(torch.int32)) | (got.isnan() & want.isnan())
        print(f"libdevice_ftz={ftz} {name}: {int((~same).sum())} of {m} differ from eager bit for bit")

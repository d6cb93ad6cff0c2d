"""Probe: graphs on CUDA that read or return tensors of another device (CPU index constants and
arguments, CPU outputs, 0-d CPU scalars mutated in place: torch.optim's step counters).
Each case under strict braze, compared with eager: values, devices, mutated arguments."""
import copy
import torch
import braze

cuda = torch.device("cuda")


def compare(name, fn, make):
    torch._dynamo.reset()
    base = make()
    a, b = [t.clone() for t in base], [t.clone() for t in base]
    try:
        with braze.config.patch(strict=True):
            got = torch.compile(fn, backend="braze")(*a)
        want = fn(*b)
        got_l = got if isinstance(got, (tuple, list)) else [got]
        want_l = want if isinstance(want, (tuple, list)) else [want]
        for g, w in list(zip(got_l, want_l)) + list(zip(a, b)):
            if isinstance(w, torch.Tensor):
                assert g.device == w.device, f"device {g.device} vs eager {w.device}"
                torch.testing.assert_close(g, w)
        print(f"{name}: ok")
    except Exception as e:
        print(f"{name}: FAIL {type(e).__name__}: {str(e)[:300]}")


compare("constant index tensor", lambda x: x[:, torch.tensor([1, 3])] * 2,
        lambda: [torch.randn(5, 4, device=cuda)])
compare("index_put with a constant index", lambda x, v: torch.ops.aten.index_put(x, [None, torch.tensor([1, 3])], v),
        lambda: [torch.randn(5, 4, device=cuda), torch.randn(5, 2, device=cuda)])
compare("CPU index argument", lambda x, i: x[i].sin(),
        lambda: [torch.randn(6, 3, device=cuda), torch.tensor([0, 5, 2])])
compare("CPU output beside CUDA work", lambda x, c: (x.sin(), c * 2),
        lambda: [torch.randn(8, device=cuda), torch.randn(3)])
compare("0-d CPU scalar output", lambda x, s: (x * s, s + 1),
        lambda: [torch.randn(8, device=cuda), torch.tensor(2.5)])


def bump(x, s):
    s.add_(1)
    return x * s


compare("0-d CPU scalar mutated", bump, lambda: [torch.randn(8, device=cuda), torch.tensor(3.0)])


def optim_case(cls, **kw):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(cuda)
    ref = copy.deepcopy(model)
    opt, opt_ref = cls(model.parameters(), **kw), cls(ref.parameters(), **kw)
    step = torch.compile(opt.step, backend="braze")
    try:
        for k in range(3):
            x = torch.randn(8, 16, device=cuda)
            for m in (model, ref):
                m.zero_grad(); m(x).square().mean().backward()
            with braze.config.patch(strict=True):
                step()
            opt_ref.step()
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q)
        st = opt.state[next(iter(model.parameters()))]["step"]
        print(f"{cls.__name__}{kw}: ok (step {st.item()} on {st.device})")
    except Exception as e:
        print(f"{cls.__name__}{kw}: FAIL {type(e).__name__}: {str(e)[:300]}")


torch._dynamo.reset()
optim_case(torch.optim.Adam, lr=1e-2)
torch._dynamo.reset()
optim_case(torch.optim.AdamW, lr=1e-2, foreach=False)
torch._dynamo.reset()
optim_case(torch.optim.Adam, lr=1e-2, capturable=True)

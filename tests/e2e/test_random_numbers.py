"""Random numbers drawn inside braze's kernels (``braze.lower.random``): rand, randn,
bernoulli, uniform and training dropout. Their values are not eager's, so they are
checked by what must hold of them: the distribution (means, variances, a histogram,
neighbours uncorrelated, each within 6 standard errors), the same numbers from the same
seed and new ones on the next call, dropout's output and gradient equal to what its
own mask implies, and ``fallback_random`` giving eager's numbers bit for bit."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import braze
from helpers import Compiled

N = 1 << 18


def _device():
    return torch.get_default_device()


def _within(value, expected, standard_error, what):
    assert abs(value - expected) <= 6 * standard_error, \
        f"{what}: {value} vs {expected} (6 standard errors: {6 * standard_error:.2e})"


def _check_uniform(u: torch.Tensor, low=0.0, high=1.0):
    u = u.double().flatten()
    n, span = u.numel(), high - low
    assert low <= u.min().item() and u.max().item() < high
    _within(u.mean().item(), (low + high) / 2, span / math.sqrt(12 * n), "mean")
    _within(u.var().item(), span ** 2 / 12, span ** 2 * math.sqrt((1 / 80 - 1 / 144) / n), "variance")
    counts = torch.histc(u, bins=16, min=low, max=high)
    for count in counts.tolist():
        _within(count / n, 1 / 16, math.sqrt(1 / 16 * 15 / 16 / n), "histogram bin")
    centered = u - u.mean()
    lag1 = (centered[1:] * centered[:-1]).mean() / centered.var()
    _within(lag1.item(), 0.0, 1 / math.sqrt(n), "correlation of neighbours")


def test_rand_and_randn_have_their_distributions(backend):
    def draw(x):
        return torch.rand(x.shape, device=x.device), torch.randn(x.shape, device=x.device) * 2 + x

    with Compiled() as rec:
        u, g = braze.compile(draw)(torch.ones(N // 256, 256))
    assert rec.graphs and not rec.failures
    _check_uniform(u)
    g = (g.double() - 1) / 2
    _within(g.mean().item(), 0.0, 1 / math.sqrt(N), "normal mean")
    _within(g.var().item(), 1.0, math.sqrt(2 / N), "normal variance")
    _within((g.abs() < 1).double().mean().item(), math.erf(1 / math.sqrt(2)), 0.5 / math.sqrt(N), "within one sigma")


def test_same_seed_same_numbers_and_each_call_new_ones(backend):
    def draw(x):
        return x + torch.rand_like(x), torch.rand_like(x)  # two random tensors: two streams

    fn = braze.compile(draw)
    x = torch.zeros(4096)
    torch.manual_seed(11)
    first = fn(x)
    torch.manual_seed(11)
    again = fn(x)
    later = fn(x)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], later[0])
    assert (first[0] == first[1]).sum().item() < 10  # the graph's two tensors draw other counters


def _first_words(seed: int, n: int) -> np.ndarray:
    """Words 0 .. n - 1 of the stream: word i % 4 of counter i // 4 (``rand``'s and ``randint``'s)."""
    return np.choose(np.arange(n) % 4, _philox_words(seed, np.arange(n, dtype=np.uint64) // np.uint64(4)))


def _philox_words(seed: int, counters: np.ndarray) -> list:
    """Philox4x32-10 (Salmon et al. 2011) of counters (counter low, counter high, 0, 0)
    under key (seed low, seed high): its four words, in numpy uint64 holding 32-bit values."""
    low = np.uint64(0xFFFFFFFF)
    c0, c1 = counters & low, counters >> np.uint64(32)
    c2 = c3 = np.zeros_like(counters)
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32)
    for _ in range(10):
        p0, p2 = np.uint64(0xD2511F53) * c0, np.uint64(0xCD9E8D57) * c2
        c0, c2 = (p2 >> np.uint64(32)) ^ c1 ^ k0, (p0 >> np.uint64(32)) ^ c3 ^ k1
        c1, c3 = p2 & low, p0 & low
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & low, (k1 + np.uint64(0xBB67AE85)) & low
    return [c0, c1, c2, c3]


def _uniform_of_words(words: np.ndarray) -> torch.Tensor:
    """Words to [0, 1) as the kernels map them: as int32, negatives folded to -x - 1."""
    x = torch.from_numpy(words.astype(np.uint32).view(np.int32).astype(np.int64))
    x = torch.where(x < 0, -x - 1, x)
    return x.to(torch.float32) * torch.tensor(4.6566127342e-10, dtype=torch.float32, device="cpu")


@pytest.mark.parametrize("shape, reduce", [((37, 3), False), ((5, 70), False), ((6, 37), True),
                                           ((2, 50001), True)])
def test_numbers_are_philox_words_four_to_a_counter(backend, shape, reduce):
    """A uniform is word i % 4 of counter i // 4, a normal the pair of words i % 2 of counter
    i // 2 (Box-Muller), counted from a whole counter after the words of the graph's earlier
    random tensors: checked against a numpy Philox from the call's seed. Rows of 70 and 37
    start inside a counter and end in a tail after the last block of lanes (the C++ backend
    draws a block's words at once); ``reduce`` draws them in a row kernel's loop (two long
    rows: shared by the threads, the C++ ``split`` shape, where there are two)."""
    def draw(x):
        u, z = torch.rand(x.shape, device=x.device), torch.randn(x.shape, device=x.device)
        return (u, z, (u * x).sum(-1) + z.amax(-1)) if reduce else (u, z)

    x = torch.rand(*shape, device=_device())
    torch.manual_seed(3)
    seed = int(torch.randint(0, 2 ** 63 - 1, [1], device=_device()).item())  # the call's seed
    torch.manual_seed(3)
    u, z = (t.cpu() for t in braze.compile(draw)(x)[:2])
    n = x.numel()
    assert torch.equal(u.flatten(), _uniform_of_words(_first_words(seed, n)))
    first = -(-n // 4) * 4 // 2  # the normals' first number: the next whole counter, 2 words each
    i = np.arange(first, first + n, dtype=np.uint64)
    words = _philox_words(seed, i // np.uint64(2))
    odd = (i % np.uint64(2)).astype(np.int64)
    u1 = _uniform_of_words(np.choose(odd, [words[0], words[2]])).double().clamp(min=1.0e-7)
    angle = _uniform_of_words(np.choose(odd, [words[1], words[3]])).double() * 6.283185307179586
    expected_z = torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(angle)
    # the GPU's log, cos and sqrt are approximate (cos.approx: 2^-20.5 absolute), not the pairs
    close = 2e-6 if x.device.type == "cpu" else 2e-5
    torch.testing.assert_close(z.flatten().double(), expected_z, rtol=close, atol=close)


@pytest.mark.parametrize("low, high, dtype", [(0, 10, torch.int64), (-3, 1000003, torch.int32),
                                             (5, 5 + 2 ** 32, torch.int64), (-4, 4, torch.float32)])
def test_randint_is_low_plus_a_word_modulo_the_range(backend, low, high, dtype):
    """``randint(low, high)`` is ``low + word % (high - low)``, the word of element i being
    word i % 4 of counter i // 4 (as ``rand``'s), checked against a numpy Philox; it runs
    in braze's kernel, fused with what reads it."""
    def draw(x):
        return torch.randint(low, high, x.shape, dtype=dtype, device=x.device) * 2 + x.to(dtype)

    x = torch.randint(0, 3, (5, 70), device=_device())
    torch.manual_seed(4)
    seed = int(torch.randint(0, 2 ** 63 - 1, [1], device=_device()).item())
    torch.manual_seed(4)
    with Compiled() as rec:
        result = braze.compile(draw)(x).cpu()
    assert sum(len(g.fallbacks) for g in rec.graphs) == 0 and len(rec.graphs[0].kernels) == 1
    values = torch.from_numpy(_first_words(seed, x.numel()).astype(np.int64) % (high - low) + low)
    assert result.dtype == dtype
    assert torch.equal(result.flatten(), (values.to(dtype) * 2 + x.cpu().flatten().to(dtype)))


def test_randint_beyond_32_bits_runs_through_aten(backend):
    """Ranges wider than 2^32 take 64 random bits in eager: ATen draws them (one fallback)."""
    x = torch.rand(8, device=_device())
    with Compiled() as rec, braze.config.patch(strict=False):
        y = braze.compile(lambda x: torch.randint(0, 2 ** 40, x.shape, device=x.device) + 1)(x)
    assert [f for g in rec.graphs for f in g.fallbacks] == ["aten.randint.low"]
    assert y.dtype == torch.int64 and bool(((y >= 1) & (y <= 2 ** 40)).all())


def test_cpp_and_triton_draw_the_same_uniforms(monkeypatch):
    """The C++ Philox is Triton's: from one seed both backends give the same bits."""
    def draw(x):
        return torch.rand(x.shape, device=x.device) * x, torch.rand(x.shape, dtype=torch.bfloat16, device=x.device)

    x = torch.rand(300, 70, device="cpu") + 1
    results = []
    for name in ("cpp", "triton"):
        torch._dynamo.reset()
        if name == "triton":
            monkeypatch.setenv("TRITON_INTERPRET", "1")
        with braze.config.patch(cpu_backend=name):
            torch.manual_seed(5)
            results.append(braze.compile(draw)(x))
    for a, b in zip(*results):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_output_and_gradient_follow_its_mask(backend, dtype):
    p = 0.1
    x = (torch.rand(N // 512, 512) + 0.5).to(_device(), dtype).requires_grad_()
    g = (torch.rand(x.shape) + 0.5).to(_device(), dtype)

    def step(x):
        return F.dropout(x * 2, p, training=True)

    with Compiled() as rec:
        y = braze.compile(step)(x)
        y.backward(g)
    assert len(rec.graphs) == 2 and not rec.failures
    assert sum(len(graph.fallbacks) for graph in rec.graphs) == 0
    keep = y != 0
    _within(keep.double().mean().item(), 1 - p, math.sqrt(p * (1 - p) / N), "kept fraction")
    scale = 1.0 / (1.0 - p)
    twice = (x.detach() * 2).float()
    assert torch.equal(y.float(), torch.where(keep, (twice * scale).to(dtype).float(), 0.0))
    assert torch.equal(x.grad.float(), torch.where(keep, (g.float() * scale).to(dtype).float() * 2, 0.0))


def test_dropout_fuses_into_one_kernel():
    def fn(x):
        return F.dropout(x * 2, 0.2, training=True) + 1

    report = braze.explain(fn, torch.randn(1000))
    assert len(report.kernels) == 1 and not report.fallbacks
    assert "aten.rand.default" in report.kernels[0].ops
    assert report.externs == ["aten.randint.low"]  # the call's seed


def test_bernoulli_and_uniform(backend):
    def draw(x):
        return torch.bernoulli(x, 0.3), torch.empty_like(x).uniform_(-2.0, 3.0)

    with Compiled() as rec:
        hits, u = braze.compile(draw)(torch.zeros(N))
    assert rec.graphs and not rec.failures and not any(g.fallbacks for g in rec.graphs)
    assert set(hits.unique().tolist()) <= {0.0, 1.0}
    _within(hits.double().mean().item(), 0.3, math.sqrt(0.21 / N), "bernoulli mean")
    _check_uniform(u, -2.0, 3.0)


def test_low_precision_uniforms_stay_below_one(backend):
    with Compiled() as rec:
        u = braze.compile(lambda x: torch.rand_like(x))(torch.zeros(N, dtype=torch.bfloat16))
    assert rec.graphs
    assert u.max().item() < 1.0 and u.unique().numel() == 256  # bfloat16's 8-bit grid: k / 256


def test_fallback_random_gives_eagers_numbers():
    def fn(x):
        return F.dropout(x + 1, 0.3, training=True), torch.rand(x.shape, device=x.device)

    x = torch.randn(64, 33, device=_device())
    torch.manual_seed(7)
    expected = fn(x)
    with braze.config.patch(fallback_random=True):
        with Compiled() as rec:
            torch.manual_seed(7)
            actual = braze.compile(fn)(x)
    assert rec.graphs and any(rec.graphs[0].fallbacks)
    for a, e in zip(actual, expected):
        assert torch.equal(a, e)


def test_float64_random_numbers_run_through_aten():
    """A double's 53 random bits are not drawn in kernels (their float32 uniform has 24):
    ATen draws them, eager's numbers from the same seed."""
    def fn(x):
        return torch.rand(x.shape, dtype=torch.float64, device=x.device) + x

    x = torch.randn(100, device=_device(), dtype=torch.float64)
    torch.manual_seed(3)
    expected = fn(x)
    with Compiled() as rec:
        torch.manual_seed(3)
        actual = braze.compile(fn)(x)
    assert rec.graphs and "aten.rand.default" in rec.graphs[0].fallbacks
    assert torch.equal(actual, expected)


def test_training_with_dropout_modules_compiles_without_fallbacks(backend):
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(128, 64), torch.nn.Dropout(0.1), torch.nn.LayerNorm(64))
    model.to(_device()).train()
    x = torch.randn(32, 64).to(_device())
    with Compiled() as rec:
        out = torch.compile(model, backend="braze")(x)
        out.sum().backward()
    assert len(rec.graphs) == 2 and not any(g.fallbacks for g in rec.graphs)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_normal_and_exponential(backend):
    def draw(mean, std, x):
        return torch.normal(mean, std), torch.normal(mean, 2.0), torch.empty_like(x).normal_(3.0, 0.5), \
            torch.empty_like(x).exponential_(4.0)

    mean = (torch.rand(N // 64, 64) * 4 - 2).to(_device())
    std = (torch.rand(N // 64, 64) + 0.5).to(_device())
    with Compiled() as rec:
        a, b, c, e = braze.compile(draw)(mean, std, torch.zeros(N // 64, 64))
    assert rec.graphs and not rec.failures and not any(g.fallbacks for g in rec.graphs)
    for z in ((a - mean) / std, (b - mean) / 2, (c - 3.0) / 0.5):
        z = z.double()
        _within(z.mean().item(), 0.0, 1 / math.sqrt(N), "normal mean")
        _within(z.var().item(), 1.0, math.sqrt(2 / N), "normal variance")
    assert e.min().item() > 0
    e = e.double()
    _within(e.mean().item(), 0.25, 0.25 / math.sqrt(N), "exponential mean")
    _within((e > 0.25).double().mean().item(), math.exp(-1), math.sqrt(math.exp(-1) * (1 - math.exp(-1)) / N),
            "exponential tail")


def test_gumbel_softmax_compiles_without_fallbacks(backend):
    logits = torch.randn(64, 10).to(_device())
    with Compiled() as rec:
        y = braze.compile(lambda t: F.gumbel_softmax(t, tau=0.5, hard=True))(logits)
    assert rec.graphs and not any(g.fallbacks for g in rec.graphs)
    assert torch.equal(y.sum(-1), torch.ones(64, device=y.device)) and set(y.unique().tolist()) <= {0.0, 1.0}

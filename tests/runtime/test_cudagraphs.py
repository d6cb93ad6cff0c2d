"""The ``cudagraphs`` option (``braze/runtime/cudagraphs.py``): on a CPU graph it warns why
it does nothing; on a GPU replays match eager, outputs of one call survive the next, and a
capture is replayed only while no output of it is still held (at most ``MAX_CAPTURES``).
Graphs that update their inputs: each update applied once per call, parameters and buffers
written in place (captured again when one moves), other inputs copied back; checked on the
CPU with a recorder that replays by running the graph (``Emulated``) and on a GPU."""
import warnings

import pytest
import torch


def test_cudagraphs_option_explains_why_not_on_cpu():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = torch.compile(lambda x: x.sin() * 2, backend="braze", options={"cudagraphs": True})
        x = torch.randn(5, device="cpu")
        torch.testing.assert_close(f(x), x.sin() * 2)
    assert any("not run through CUDA graphs" in str(w.message) and "cpu" in str(w.message) for w in caught)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cudagraphs_replay_matches_and_outputs_survive_the_next_call():
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU(), torch.nn.LayerNorm(32)).cuda()
    f = torch.compile(model, backend="braze", options={"cudagraphs": True})
    with torch.no_grad():
        xs = [torch.randn(8, 32, device="cuda") for _ in range(3)]
        outs = [f(x) for x in xs]
        for x, out in zip(xs, outs):
            torch.testing.assert_close(out, model(x))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cudagraphs_replay_a_capture_only_when_its_outputs_are_free():
    from braze.runtime.cudagraphs import MAX_CAPTURES, Replayer
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU()).cuda()
    f = torch.compile(model, backend="braze", options={"cudagraphs": True})
    replayers = []
    original = Replayer.__init__
    with torch.no_grad(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(Replayer, "__init__", lambda self, *a: (original(self, *a), replayers.append(self))[0])
        for _ in range(4):  # nothing kept: one capture, replayed
            x = torch.randn(8, 32, device="cuda")
            torch.testing.assert_close(f(x), model(x))
        assert len(replayers[0].captures) == 1
        kept = [(x, f(x)) for x in (torch.randn(8, 32, device="cuda") for _ in range(4))]
        assert len(replayers[0].captures) == MAX_CAPTURES  # the rest ran without CUDA graphs
        for x, out in kept:
            torch.testing.assert_close(out, model(x))


# Graphs that write into their inputs. On the CPU: which inputs a capture copies back, the
# positions the compiler reports, and ``Replayer``'s bookkeeping with a recorder that
# replays by running the graph again (``Emulated``); on a GPU: the same through CUDA graphs.

class Emulated:
    """Records a "graph" whose replay runs the call on the capture's copies and the static
    inputs (which the replayer has checked are where they were) and writes its results
    into the recorded outputs; recording runs it on copies (CUDA graphs' capture runs
    nothing), so an update of an input happens only when a replay or warm-up runs."""

    @staticmethod
    def refuses(args) -> str:
        return ""

    @staticmethod
    def warm_up(call, args):
        return call(list(args))

    @staticmethod
    def record(call, inputs, copied) -> tuple:
        outputs = call([a.clone() if isinstance(a, torch.Tensor) else a for a in inputs])
        copies = {k: inputs[k] for k in copied}  # (no static input is held, as a CUDA graph holds none)

        def replay(args):
            for recorded, new in zip(outputs, call([copies.get(k, a) for k, a in enumerate(args)])):
                if isinstance(recorded, torch.Tensor):
                    recorded.copy_(new)
        return replay, outputs


@pytest.fixture
def replayers(monkeypatch):
    """Every ``Replayer`` made while the test runs."""
    from braze.runtime.cudagraphs import Replayer
    made = []
    original = Replayer.__init__
    monkeypatch.setattr(Replayer, "__init__", lambda self, *a, **k: (original(self, *a, **k), made.append(self))[0])
    return made


def test_only_mutated_inputs_that_are_not_static_are_copied_back():
    from braze.runtime.cudagraphs import input_roles
    args = [torch.randn(2), 3, torch.randn(2), torch.randn(2), torch.randn(2)]
    static, copied, copied_back = input_roles(args, static={0, 3, 9}, mutated={0, 2})
    assert (static, copied, copied_back) == ([0, 3], [2, 4], [2])


def test_a_compiled_graph_names_the_inputs_it_writes_into():
    from braze.backend import Recording

    def double(x, y):
        x.mul_(2)
        return x + y

    with Recording() as rec:
        torch.compile(double, backend="braze")(torch.randn(5), torch.randn(5))
    assert [g.mutated_inputs for g in rec.graphs] == [(0,)]
    bn = torch.nn.BatchNorm1d(4)  # training: running mean, variance and batch count updated
    torch._dynamo.reset()
    with Recording() as rec:
        torch.compile(bn, backend="braze")(torch.randn(8, 4, requires_grad=True)).sum().backward()
    forward, backward = rec.graphs
    assert len(forward.mutated_inputs) == 3 and backward.mutated_inputs == ()


def step(args):
    """An optimizer-like update of a static ``p`` by ``g`` that also doubles the caller's ``x``."""
    p, x, g = args
    p.add_(g, alpha=-0.125)
    x.mul_(2)
    return [p + x]


def test_replayer_applies_each_update_once_and_copies_back_what_it_must():
    from braze.runtime.cudagraphs import Replayer
    runner = Replayer(step, "step", static={0}, mutated={0, 1}, graphs=Emulated())
    p, x = torch.randn(6), torch.randn(6)
    p_eager, x_eager = p.clone(), x.clone()
    for _ in range(4):
        g = torch.randn(6)
        out, = runner([p, x, g])
        expected, = step([p_eager, x_eager, g])
        assert torch.equal(out, expected) and torch.equal(p, p_eager) and torch.equal(x, x_eager)
        del out
    assert (runner.captures_made, runner.replays) == (1, 3)  # the first call was the warm-up


def test_replayer_captures_again_when_a_static_input_moves_or_an_output_is_held():
    from braze.runtime.cudagraphs import MAX_CAPTURES, Replayer
    runner = Replayer(step, "step", static={0}, mutated={0, 1}, graphs=Emulated())
    p, x = torch.randn(6), torch.randn(6)
    p_eager, x_eager = p.clone(), x.clone()
    held = []
    # call: 0 capture (its warm-up returns), 1 replay; 2 the parameter moves (a replay would
    # write to its old storage): capture again; 3 replay; 4 the output of 3 is held: a second
    # capture, 5 its replay; 6 both held, MAX_CAPTURES made: a run without graphs
    for call in range(7):
        if call == 2:
            p, p_eager = p.clone(), p_eager.clone()
        g = torch.randn(6)
        held.append((runner([p, x, g])[0], step([p_eager, x_eager, g])[0]))
        assert torch.equal(p, p_eager) and torch.equal(x, x_eager)
    assert MAX_CAPTURES == 2 and (runner.captures_made, runner.replays, len(runner.captures)) == (3, 3, 2)
    for out, expected in held:
        assert torch.equal(out, expected)


def test_batchnorm_training_through_a_replayer_matches_eager(monkeypatch, replayers):
    """The whole path on the CPU (AOTAutograd's static inputs, the compiler's mutated inputs,
    the forward and backward graphs), with ``Emulated`` recording in place of CUDA graphs."""
    from braze.runtime import cudagraphs
    monkeypatch.setattr(cudagraphs, "CUDA_GRAPHS", Emulated())
    monkeypatch.setattr(cudagraphs, "why_not_capturable", lambda compiled: None)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())
    _train_like_eager(model, torch.compile(_copy(model), backend="braze", options={"cudagraphs": True}),
                      lambda: torch.randn(16, 6), replayers)


def _copy(model):
    import copy
    return copy.deepcopy(model)


def _updates_like_eager(model, calls: int, make_input, moved_at: int | None = None) -> None:
    """``calls`` calls of ``model`` and of a copy compiled with CUDA graphs: the same output,
    parameters and buffers after each; at call ``moved_at`` every buffer of both gets new
    storage (the same tensor objects: the old address is stale)."""
    compiled_model = _copy(model)
    f = torch.compile(compiled_model, backend="braze", options={"cudagraphs": True})
    for call in range(calls):
        if call == moved_at:
            for mine, theirs in zip(compiled_model.buffers(), model.buffers()):
                fresh = torch.randn_like(theirs)
                mine.data, theirs.data = fresh.clone(), fresh.clone()
        x = make_input()
        assert torch.equal(f(x), model(x))
        for mine, theirs in zip(compiled_model.state_dict().values(), model.state_dict().values()):
            assert torch.equal(mine, theirs)


def _train_like_eager(model, compiled, make_input, replayers, steps=4):
    """``steps`` training steps of ``model`` and its ``compiled`` copy: the same running
    statistics, gradients and outputs; the forward and backward graphs replayed (the
    backward's first capture reads the forward's warm-up outputs: it is made again at
    the second step, when the forward's outputs come from its capture)."""
    compiled_model = compiled._orig_mod
    for _ in range(steps):
        x = make_input()
        out, expected = compiled(x), model(x)
        torch.testing.assert_close(out, expected)
        out.square().mean().backward()
        expected.square().mean().backward()
        for (name, a), b in zip(compiled_model.named_parameters(), model.parameters()):
            torch.testing.assert_close(a.grad, b.grad, msg=name)
            a.grad = b.grad = None
        for (name, a), b in zip(compiled_model.named_buffers(), model.buffers()):
            torch.testing.assert_close(a, b, msg=name)
        del out  # (held into the next call, its capture could not be replayed)
    assert len(replayers) == 2 and [r.replays for r in replayers] == [steps - 1, steps - 2]


cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@cuda_only
def test_cudagraphs_batchnorm_training_matches_eager(replayers):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).cuda()
    _train_like_eager(model, torch.compile(_copy(model), backend="braze", options={"cudagraphs": True}),
                      lambda: torch.randn(4, 3, 16, 16, device="cuda"), replayers)


class Sgd(torch.nn.Module):
    """An update of a parameter and a buffer inside the graph (a step of 1/8: exact)."""

    def __init__(self):
        super().__init__()
        self.p = torch.nn.Parameter(torch.randn(64))
        self.register_buffer("b", torch.randn(64))

    def forward(self, g):
        with torch.no_grad():
            self.p.add_(g, alpha=-0.125)
            self.b.add_(g, alpha=-0.125)
        return self.p.detach() * 2 + self.b


@cuda_only
def test_cudagraphs_update_parameters_and_buffers_in_place(replayers):
    _updates_like_eager(Sgd().cuda(), 5, lambda: torch.randn(64, device="cuda"))
    assert sum(r.captures_made for r in replayers) == 1 and sum(r.replays for r in replayers) == 4


@cuda_only
def test_cudagraphs_copy_a_mutated_user_tensor_back(replayers):
    def double(x):
        x.mul_(2)
        return x + 1

    f = torch.compile(double, backend="braze", options={"cudagraphs": True})
    x = torch.randn(32, device="cuda")
    x_eager = x.clone()
    for call in range(5):
        if call == 3:  # another tensor of the same shape
            x = torch.randn(32, device="cuda")
            x_eager = x.clone()
        assert torch.equal(f(x), double(x_eager))
        assert torch.equal(x, x_eager)
    assert sum(r.replays for r in replayers) == 4


@cuda_only
def test_cudagraphs_return_a_mutated_user_tensor_and_a_view_of_it(replayers):
    def bump(x):
        x.add_(1)
        return x, x[1:]

    f = torch.compile(bump, backend="braze", options={"cudagraphs": True})
    x = torch.randn(16, device="cuda")
    expected = x.clone()
    for _ in range(4):
        whole, tail = f(x)
        expected += 1
        assert whole.data_ptr() == x.data_ptr() and torch.equal(x, expected)
        assert torch.equal(tail, expected[1:])
    assert sum(r.replays for r in replayers) >= 1


class Accumulate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(16))

    def forward(self, x):
        self.total.add_(x)
        return self.total * 2


@cuda_only
def test_cudagraphs_capture_again_when_a_mutated_buffer_moves(replayers):
    _updates_like_eager(Accumulate().cuda(), 6, lambda: torch.randn(16, device="cuda"), moved_at=3)
    assert sum(r.captures_made for r in replayers) == 2 and sum(r.replays for r in replayers) == 4


# Graphs with symbolic sizes: captures per concrete shape, at most ``cudagraph_shapes`` kept.

def test_per_shape_captures_each_shape_once_and_drops_the_least_recently_used():
    from braze.runtime.cudagraphs import PerShape
    runner = PerShape(lambda args: [args[0] * 2 + args[1]], "g", static=set(), mutated=set(), limit=2, graphs=Emulated())
    for rows in (3, 5, 3, 3, 7, 5):  # 7 drops 5's captures (least recently used), 5 drops 3's
        x, n = torch.randn(rows, 4), rows
        torch.testing.assert_close(runner([x, n])[0], x * 2 + n)
    assert list(runner.replayers) == [(((7, 4), (4, 1)), 7), (((5, 4), (4, 1)), 5)]
    assert [(r.captures_made, r.replays) for r in runner.replayers.values()] == [(1, 0), (1, 0)]


def test_per_shape_replays_a_shape_seen_before(replayers):
    from braze.runtime.cudagraphs import PerShape
    runner = PerShape(lambda args: [args[0].sin()], "g", set(), set(), limit=4, graphs=Emulated())
    for rows in (2, 6, 2, 6, 2):
        x = torch.randn(rows, 3)
        torch.testing.assert_close(runner([x])[0], x.sin())
    assert [(r.captures_made, r.replays) for r in replayers] == [(1, 2), (1, 1)]


@cuda_only
def test_cudagraphs_with_symbolic_sizes_capture_per_shape(replayers):
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU(), torch.nn.LayerNorm(32)).cuda()
    f = torch.compile(model, backend="braze", options={"cudagraphs": True}, dynamic=True)
    with torch.no_grad():
        for rows in (8, 16, 8, 16, 24, 8):
            x = torch.randn(rows, 32, device="cuda")
            torch.testing.assert_close(f(x), model(x))
    assert sum(r.captures_made for r in replayers) == 3 and sum(r.replays for r in replayers) == 3

"""The ``cudagraphs`` option (``braze/runtime/cudagraphs.py``): on a CPU graph it warns why
it does nothing; on a GPU replays match eager, outputs of one call survive the next, and a
capture is replayed only while no output of it is still held (at most ``MAX_CAPTURES``)."""
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

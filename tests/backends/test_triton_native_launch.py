"""braze's own kernel launcher (``codegen/triton/native.py``): its C source builds with the
configured compiler on any machine, a machine without a CUDA driver falls back to Triton's
launchers with the reason kept, the kernels it refuses are the ones it cannot run, and on a
GPU the kernels launch through it with eager's results (and through Triton's with it off)."""
import os
import sysconfig
import types

import pytest
import torch

import braze
from braze.codegen.triton import native

triton = pytest.importorskip("triton")
GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
HEADERS = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))


@pytest.mark.skipif(not HEADERS, reason="no Python headers: Triton's launchers run everything")
def test_the_extension_source_compiles(tmp_path):
    out = tmp_path / "launch.so"
    native._compile(str(out))
    assert out.stat().st_size > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without a CUDA driver")
def test_without_a_driver_triton_launchers_take_over():
    assert not native.enabled()
    assert ("libcuda" if HEADERS else "failed") in native._state["error"]


def _kernel(signature: dict, **meta):
    defaults = dict(num_ctas=1, launch_cooperative_grid=False, launch_pdl=False, global_scratch_size=0,
                    profile_scratch_size=0, tensordesc_meta=None, num_warps=4, shared=0)
    return types.SimpleNamespace(src=types.SimpleNamespace(signature=signature),
                                 metadata=types.SimpleNamespace(**{**defaults, **meta}))


@pytest.mark.parametrize("signature,meta,expected", [
    ({"x": "*fp32", "y": "*bf16", "BLOCK": "constexpr"}, {}, True),
    ({"x": "*fp32", "n": "i32"}, {}, False),  # a scalar argument
    ({"x": "*fp32"}, {"global_scratch_size": 128}, False),
    ({"x": "*fp32"}, {"profile_scratch_size": 64}, False),
    ({"x": "*fp32"}, {"num_ctas": 2}, False),
    ({"x": "*fp32"}, {"launch_cooperative_grid": True}, False),
    ({"x": "*fp32"}, {"launch_pdl": True}, False),
])
def test_only_kernels_it_can_run_are_launched_by_it(signature, meta, expected):
    assert native._launchable(_kernel(signature, **meta)) is expected


def _launchers(report) -> str:
    return report.graphs[0].source.split("# ---- launchers")[1]


@GPU
@pytest.mark.parametrize("on", [True, False])
def test_kernels_launch_through_it_on_a_gpu(on):
    """A row reduction, a tiled transpose and a training step's backward (autograd's own
    thread): eager's values, through braze's launcher or, with it off, Triton's."""
    x = torch.randn(300, 1000, device="cuda", requires_grad=True)
    fn = lambda x: (torch.softmax(x, -1).t().contiguous() * 3).sum()  # noqa: E731
    torch._dynamo.reset()
    with braze.config.patch(native_launch=on, cache=False):
        report = braze.explain(fn, x.detach())
        assert ("_launch(" in _launchers(report)) is on and ("_run(" in _launchers(report)) is not on
        torch._dynamo.reset()
        loss = torch.compile(fn, backend="braze")(x)
        loss.backward()
    grad, x.grad = x.grad, None
    expected = fn(x)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(grad, x.grad)


def test_a_size_compiled_as_a_multiple_of_16_is_checked_by_the_launcher():
    """A call whose size is not the multiple of 16 its kernel was compiled for goes through
    Triton's own launch (which specializes for it), as an unaligned pointer does."""
    from braze.codegen.triton.launch import Launch, LauncherSpec, launcher_text
    launch = Launch("k", ["buf0", "s0", "s1"], {"XBLOCK": 8}, 4, ("s0", 1, 1),
                    compiled=types.SimpleNamespace(braze_launch=(128, 0, 0)),
                    signature={"in0": "*fp32", "s0": "i32:16", "s1": "i32", "XBLOCK": "constexpr"})
    text = launcher_text(LauncherSpec("kernel0", ["buf0"], [launch], sizes=["s0", "s1"]), gpu=True)
    check = next(line for line in text.splitlines() if "% 16" in line)
    assert "buf0.data_ptr()" in check and "s0" in check and "s1" not in check
    aligned = Launch("k", ["buf0", "s0"], {"XBLOCK": 8, "ALIGNED": True}, 4, ("s0", 1, 1),
                     compiled=types.SimpleNamespace(braze_launch=(128, 0, 0)),
                     signature={"in0": "*fp32", "s0": "i32:16", "XBLOCK": "constexpr", "ALIGNED": "constexpr"})
    text = launcher_text(LauncherSpec("kernel0", ["buf0"], [aligned], sizes=["s0"]), gpu=True)
    own_launch = next(line for line in text.splitlines() if "k[(" in line)
    assert "ALIGNED=False" in own_launch  # (its sizes were not checked: no assumption on them)


def test_a_constexpr_decided_at_the_call_sends_other_values_through_triton():
    """``ROWFULL`` (a symbolic row exactly one block long: no mask along it) is compiled for
    the value of the call compiled; a call with the other value takes Triton's own launch,
    given the value its sizes have, and the alignment its pointers have."""
    from braze.codegen.triton.launch import Launch, LauncherSpec, launcher_text
    launch = Launch("k", ["buf0", "s0"], {"XBLOCK": 1, "RBLOCK": 64, "ROWFULL": True, "ALIGNED": True}, 4,
                    ("s1", 1, 1), compiled=types.SimpleNamespace(braze_launch=(128, 0, 0)),
                    signature={"in0": "*fp32", "s0": "i32:16"}, run_time={"ROWFULL": "(s0 == 64)"})
    text = launcher_text(LauncherSpec("kernel0", ["buf0"], [launch], sizes=["s0"]), gpu=True)
    check = next(line for line in text.splitlines() if "% 16" in line)
    assert "(s0 == 64) != True" in check
    own_launch = next(line for line in text.splitlines() if "k[(" in line)
    assert "ROWFULL=(s0 == 64)" in own_launch and "ALIGNED=(buf0.data_ptr() | s0) % 16 == 0" in own_launch
    interpreted = launcher_text(LauncherSpec("kernel0", ["buf0"], [launch], sizes=["s0"]), gpu=False)
    assert "ROWFULL=(s0 == 64)" in interpreted  # (each call: the interpreter's one kernel serves both)


def test_a_symbolic_row_kernel_is_right_for_full_rows_and_shorter_ones():
    """One variant (rows of 33..64 share a block of 64) serves a row of exactly 64 with
    ``ROWFULL`` and the others masked."""
    from helpers import Compiled
    f = lambda x: (torch.softmax(x, -1), torch.nn.functional.layer_norm(x, x.shape[-1:]))
    with braze.config.patch(cpu_backend="triton"), Compiled() as compiled:
        g = torch.compile(f, backend="braze", dynamic=True)
        for n in (64, 48, 64, 40):
            x = torch.randn(5, n)
            for a, b in zip(g(x), f(x)):
                torch.testing.assert_close(a, b)
    assert len(compiled.graphs) == 1 and compiled.graphs[0].sizes is not None
    assert "ROWFULL=(" in compiled.graphs[0].source

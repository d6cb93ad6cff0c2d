"""What braze does with an op it cannot or must not compile: a broken lowering rule is a
``BrazeError`` naming the op, its shapes and dtypes (strict) or one warning and an eager
run (not strict); an op whose output size depends on its input's values is refused by
name; ops without a lowering, or forced out by ``fallback_ops``, run through ATen inside
the compiled graph, and a view such a call returns keeps its base's storage alive; under
``strict_ops`` (with ``strict``) such a per-op fallback is an error too, but not one the
user asked for with ``fallback_ops``."""
import warnings

import pytest
import torch

import braze
from helpers import Compiled, check


def test_strict_error_names_op_shapes_and_dtypes():
    from braze.lower import LOWERINGS
    original = LOWERINGS[torch.ops.aten.exp.default]
    LOWERINGS[torch.ops.aten.exp.default] = lambda ctx, x: 1 / 0  # a broken rule
    try:
        with pytest.raises(Exception) as info:
            torch.compile(lambda x: x.exp() + 1, backend="braze")(torch.randn(3, 4))
        text = str(info.value)
        assert "aten.exp.default" in text and "f32[3, 4]" in text and "BrazeError" in text
    finally:
        LOWERINGS[torch.ops.aten.exp.default] = original


def test_non_strict_failure_warns_once_and_runs_eagerly():
    from braze.lower import LOWERINGS
    original = LOWERINGS[torch.ops.aten.exp.default]
    LOWERINGS[torch.ops.aten.exp.default] = lambda ctx, x: 1 / 0
    try:
        with braze.config.patch(strict=False), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x = torch.randn(5)
            out = torch.compile(lambda x: x.exp() * 2, backend="braze")(x)
        torch.testing.assert_close(out, x.exp() * 2)
        messages = [str(w.message) for w in caught if "braze" in str(w.message)]
        assert len(messages) == 1 and "aten.exp.default" in messages[0]
    finally:
        LOWERINGS[torch.ops.aten.exp.default] = original


def test_an_op_whose_values_decide_its_size_is_refused_by_name():
    """The backward of ``index_fill`` with a tensor value sums the gradient at the unique
    indices: ``_unique``'s result size is known only at run time. A trace that fixes it (real
    tensors here; a guessed size under fake tensors) must not become a static buffer: the
    value's gradient would sum over the traced number of indices, not the run's."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from braze.codegen import target_for
    from braze.lower import graph_device, lower
    from braze.lower.core import LoweringError

    def unique_sum(idx, g):
        return g.index_select(-1, torch.ops.aten._unique(idx, False)[0]).sum()
    gm = make_fx(unique_sum)(torch.tensor([2, 1, 4, 2, 2]), torch.randn(5, 5))
    with pytest.raises(LoweringError) as info:
        lower(gm, target_for(graph_device(gm)))
    assert "aten._unique.default" in str(info.value) and "(3,)" in str(info.value)
    assert "depends on its input's values" in str(info.value)
    # the same text is the strict error: it must not say the graph runs anyway
    assert "cannot compile this graph" in str(info.value) and "through ATen" not in str(info.value)
    torch._dynamo.config.capture_dynamic_output_shape_ops = True  # the backward then holds _unique
    try:
        x, v = torch.randn(5, 5, requires_grad=True), torch.randn((), requires_grad=True)
        idx = torch.tensor([2, 1, 4, 2, 2])
        with braze.config.patch(strict=False), warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            out = torch.compile(lambda x, v: x.index_fill(-1, idx, v), backend="braze")(x, v)
            g = torch.randn(5, 5)
            got = torch.autograd.grad(out, (x, v), g)
        expected = torch.autograd.grad(x.index_fill(-1, idx, v), (x, v), g)
        torch.testing.assert_close(got, expected)
    finally:
        torch._dynamo.config.capture_dynamic_output_shape_ops = False


def test_repeat_interleave_given_its_output_size_is_not_refused():
    from torch.fx.experimental.proxy_tensor import make_fx
    from braze.codegen import target_for
    from braze.lower import graph_device, lower
    gm = make_fx(lambda r, x: x[torch.repeat_interleave(r, output_size=6)] * 2)(torch.tensor([1, 2, 3]), torch.randn(3))
    lower(gm, target_for(graph_device(gm)))


def test_unlowered_ops_run_through_aten_and_are_counted():
    x = torch.randn(6, 5)
    compiled = check(lambda x: torch.logcumsumexp(x.exp(), 1).sin(), x)
    assert any("logcumsumexp" in f for g in compiled.graphs for f in g.fallbacks)
    assert len(compiled.kernels) == 2


def test_forced_fallback_knob():
    with braze.config.patch(fallback_ops=frozenset({"aten.sin"})):
        compiled = check(lambda x: x.sin() + 1, torch.randn(4))
    assert compiled.graphs[0].fallbacks == ["aten.sin.default"]


def test_a_view_returned_by_aten_keeps_its_base_alive():
    """A fallback's result may be a view of its argument: the argument's storage is not
    reused while the view is live (stft's gradient reads its indices through such a view:
    reused storage would give it zeros)."""
    x, y, w = torch.randn(64, 48), torch.randn(48, 64), torch.randn(64, 64)
    with braze.config.patch(fallback_ops=frozenset({"aten.permute"})):
        compiled = check(lambda x, y, w: x.exp().permute(1, 0) + y.sin() @ w, x, y, w)
    assert compiled.graphs[0].fallbacks == ["aten.permute.default"]


def _kth(x):
    return torch.kthvalue(x, 2)[0] + 1  # kthvalue has no rule: one ATen call in the graph


def test_strict_ops_rejects_a_per_op_fallback_strict_alone_does_not():
    x = torch.randn(8, 16)
    with braze.config.patch(strict=True):
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(_kth, backend="braze")(x), _kth(x))
        assert braze.explain(_kth, x).fallbacks == ["aten.kthvalue.default"]
    with braze.config.patch(strict=True, strict_ops=True):
        torch._dynamo.reset()
        with pytest.raises(Exception) as info:
            torch.compile(_kth, backend="braze")(x)
    text = str(info.value)
    assert "BrazeError" in text and "aten.kthvalue.default" in text and "f32[8, 16]" in text
    assert "no rule" in text


def test_strict_ops_leaves_the_ops_the_user_sends_to_aten():
    x = torch.randn(8, 16)
    with braze.config.patch(strict=True, strict_ops=True, fallback_ops=frozenset({"aten.exp"})):
        torch._dynamo.reset()
        fn = lambda x: x.exp() * 2  # noqa: E731
        torch.testing.assert_close(torch.compile(fn, backend="braze")(x), fn(x))


def test_a_crash_of_the_cpp_compiler_is_built_again(tmp_path):
    """An internal compiler error (GCC 12's SLP vectorizer crashed once, not on the next try
    of the same file) is retried: the graph still compiles, and the user's program runs."""
    crashed = tmp_path / "crashed"
    compiler = tmp_path / "crashing-g++"
    compiler.write_text(f"""#!/bin/sh
case " $* " in *" -o "*) if [ ! -e {crashed} ]; then touch {crashed}
  echo "during GIMPLE pass: slp" >&2; echo "internal compiler error: Segmentation fault" >&2; exit 1; fi;; esac
exec g++ "$@"
""")
    compiler.chmod(0o755)
    x = torch.randn(1000)
    with braze.config.patch(cxx=str(compiler), cpu_backend="cpp"), Compiled() as compiled:
        actual = torch.compile(lambda x: torch.sin(x) * 3 + 1, backend="braze")(x)
    torch.testing.assert_close(actual, torch.sin(x) * 3 + 1)
    assert crashed.exists() and compiled.graphs and not compiled.failures

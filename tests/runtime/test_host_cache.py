"""braze's CPU buffer cache (runtime/host_cache.py): a block comes back only when no
tensor uses it, the cache stays within its limit, and a compiled training step that
reuses blocks from call to call gives eager's gradients without touching old ones."""
import threading

import torch
import torch.nn.functional as F

import braze
from braze.runtime.host_cache import CACHE, HostBufferCache


def test_a_block_returns_only_when_its_last_view_dies():
    cache = HostBufferCache()
    with braze.config.patch(host_cache_mb=64):
        t = cache.empty((512, 512), (512, 1), torch.float32, 512 * 512)
        t.copy_(torch.randn(512, 512))
        address, row = t.data_ptr(), t[1].clone()
        view = t[1:]
        del t
        other = cache.empty((512, 512), (512, 1), torch.float32, 512 * 512)
        assert other.data_ptr() != address  # the view still holds the block
        torch.testing.assert_close(view[0], row)
        del view
        again = cache.empty((512, 512), (512, 1), torch.float32, 512 * 512)
        assert again.data_ptr() == address and (cache.hits, cache.misses) == (1, 2)
        del other, again


def test_free_blocks_stay_within_the_limit_and_can_be_released():
    cache = HostBufferCache()
    with braze.config.patch(host_cache_mb=1):
        blocks = [cache.empty((1 << 18,), (1,), torch.float32, 1 << 18) for _ in range(3)]  # 1 MB each
        del blocks
        assert cache.free_bytes == 1 << 20
        cache.release_all()
        assert cache.free_bytes == 0 and not cache._owners


def test_a_strided_buffer_gets_its_whole_storage():
    cache = HostBufferCache()
    with braze.config.patch(host_cache_mb=64):
        t = cache.empty((300, 400), (1, 300), torch.float64, 300 * 400)  # column-major
        assert t.stride() == (1, 300) and t.untyped_storage().nbytes() == 300 * 400 * 8
        x = torch.randn(300, 400, dtype=torch.float64)
        t.copy_(x)
        torch.testing.assert_close(t, x)


def test_a_tensor_freed_in_another_thread_gives_its_block_back():
    cache = HostBufferCache()
    with braze.config.patch(host_cache_mb=64):
        box = [cache.empty((1 << 16,), (1,), torch.float32, 1 << 16)]
        thread = threading.Thread(target=box.clear)
        thread.start()
        thread.join()
        assert cache.free_bytes == 1 << 18


def test_off_leaves_allocation_to_aten():
    cache = HostBufferCache()
    with braze.config.patch(host_cache_mb=0):
        t = cache.empty((1 << 16,), (1,), torch.float32, 1 << 16)
    assert t.shape == (1 << 16,) and cache.misses == 0 and not cache._owners


def _mlp_loss(x, target, w1, b1, w2, b2):
    h = F.gelu(F.layer_norm(F.linear(x, w1, b1), (w1.shape[0],)))
    return F.cross_entropy(F.linear(h, w2, b2), target)


def test_training_steps_reuse_blocks_and_keep_old_gradients():
    """Three steps with the gradients set to None in between, as a training loop does:
    each step's gradients equal eager's, and the gradients of earlier steps, still held,
    are not overwritten by blocks the cache hands out again."""
    torch.manual_seed(0)
    params = [torch.randn(256, 128) * 0.1, torch.randn(256), torch.randn(10, 256) * 0.1, torch.randn(10)]
    params = [p.requires_grad_() for p in params]
    compiled = torch.compile(_mlp_loss, backend="braze")
    kept, hits = [], CACHE.hits
    with braze.config.patch(host_cache_min_kb=4):
        for step in range(3):
            x, target = torch.randn(64, 128), torch.randint(0, 10, (64,))
            expected = torch.autograd.grad(_mlp_loss(x, target, *params), params)
            for p in params:
                p.grad = None
            compiled(x, target, *params).backward()
            kept.append(([p.grad for p in params], [g.clone() for g in expected]))
            for held, eager in kept:
                for g, e in zip(held, eager):
                    torch.testing.assert_close(g, e)
        assert CACHE.hits > hits  # later steps got blocks that earlier steps freed
        report = braze.explain(_mlp_loss, x, target, *params)
    assert "out=_cached_empty(" in report.graph("backward").wrapper  # the weight gradients


def test_outputs_the_user_holds_stay_resizable():
    """A cached block's storage cannot grow, so outputs the user gets (inference results,
    a forward's visible outputs) come from ATen's allocator; intermediates still use the cache."""
    x, w = torch.randn(256, 512), torch.randn(512, 512, requires_grad=True)

    def fn(x, w):
        return (x @ w).relu() @ w

    with braze.config.patch(host_cache_min_kb=4):
        with torch.no_grad():
            out = braze.compile(fn)(x, w)
            wrapper = braze.explain(fn, x, w).graphs[0].wrapper
        assert "_cached_empty(" in wrapper  # the intermediate product
        out.resize_(512, 1024)  # would raise for a cached block
        y = braze.compile(fn)(x, w)
        y.detach().resize_(512, 1024)
        forward = braze.explain(fn, x, w).graph("forward").wrapper
    assert "_cached_empty(" in forward  # x @ w, saved for the backward

"""Shared fixtures: a fresh Dynamo per test, a seed per test, strict braze with bounds-checked
Triton kernels, and the backend matrix."""
import os
import zlib

import pytest
import torch

import braze

BACKENDS = ["cpp"]
# The Triton variant runs Triton's interpreter on CPU tensors (about 2 minutes for the
# op-family files of tests/e2e on 2 cores); BRAZE_TEST_TRITON=0 leaves it out.
if os.environ.get("BRAZE_TEST_TRITON", "1") == "1":
    try:
        import triton  # noqa: F401
        BACKENDS.append("triton")
    except ImportError:
        pass


@pytest.fixture(autouse=True)
def seeded(request):
    """Each test draws its random inputs from a seed of its own (from its id): an input no
    longer depends on which tests ran before, so a failure reproduces on its own."""
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    # The graph cache is off by default here: a test that patches braze's internals must
    # not load, or leave behind, a graph compiled under another test's patch
    # (runtime/test_graph_cache.py turns it on, in a directory of its own). Triton kernels run
    # by the interpreter have every load and store checked against their tensors.
    with braze.config.patch(strict=True, graph_cache=False, triton_bounds_check=True):
        yield
    torch._dynamo.reset()


@pytest.fixture
def triton_interpreter(monkeypatch):
    """The Triton backend for CPU tensors through Triton's interpreter (the Triton-only
    test files use it for every test: ``pytestmark`` in helpers.TRITON_ONLY)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with braze.config.patch(cpu_backend="triton"):
        yield


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    """Run the test once per code generator (Triton through TRITON_INTERPRET=1 on CPU).

    Triton reads TRITON_INTERPRET when a kernel is created (``@triton.jit`` picks the
    interpreter then, not at launch), so it is set before the test compiles anything
    and restored after it."""
    if request.param == "triton":
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    with braze.config.patch(cpu_backend=request.param):
        yield request.param

"""Shared fixtures: a fresh Dynamo per test, a seed per test, strict braze with bounds-checked
Triton kernels, and the backend matrix; a compile cache of the run's own, and pytest's log
capture kept off torch's structured trace log."""
import logging
import os
import shutil
import tempfile
import zlib

import pytest

# The tests never fill the user's cache: without BRAZE_CACHE_DIR they get a private temporary
# one (set before braze is imported, which reads it, and inherited by the processes tests start).
_OWN_CACHE = None if os.environ.get("BRAZE_CACHE_DIR") else tempfile.mkdtemp(prefix="braze-tests-")
if _OWN_CACHE:
    os.environ["BRAZE_CACHE_DIR"] = _OWN_CACHE

import torch  # noqa: E402

import braze  # noqa: E402

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
    # Under ``-p cuda_default`` (tools/cuda_default.py) the tensors are CUDA's, which Triton
    # compiles whatever ``cpu_backend`` says: the test sees the generator that runs.
    runs = "triton" if torch.get_default_device().type == "cuda" else request.param
    with braze.config.patch(cpu_backend=request.param):
        yield runs


def pytest_sessionfinish(session):
    if _OWN_CACHE:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)


# pytest adds its capture handlers to every logger that does not propagate, torch's structured
# trace log ("torch.__trace", always at DEBUG) among them. With a handler there torch builds
# every trace record of every compile, and a failing test prints thousands of empty
# "DEBUG torch.__trace" lines. Each test phase takes pytest's off again (torch's own stay:
# TORCH_TRACE still works).
_TRACE_LOG = logging.getLogger("torch.__trace")


def _detach_from_trace_log():
    for handler in list(_TRACE_LOG.handlers):
        if type(handler).__module__.startswith("_pytest"):
            _TRACE_LOG.removeHandler(handler)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_setup(item):
    _detach_from_trace_log()
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item):
    _detach_from_trace_log()
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    _detach_from_trace_log()
    return (yield)

"""Shared fixtures: a fresh Dynamo per test, strict braze, and the backend matrix."""
import os

import pytest
import torch

import braze

BACKENDS = ["cpp"]
if os.environ.get("BRAZE_TEST_TRITON", "0") == "1":
    try:
        import triton  # noqa: F401
        BACKENDS.append("triton")
    except ImportError:
        pass


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    with braze.config.patch(strict=True):
        yield
    torch._dynamo.reset()


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Run the test once per code generator (Triton through TRITON_INTERPRET=1 on CPU)."""
    if request.param == "triton":
        os.environ["TRITON_INTERPRET"] = "1"
    with braze.config.patch(cpu_backend=request.param):
        yield request.param

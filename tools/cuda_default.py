"""pytest plugin (``-p cuda_default``, with ``tools`` on ``PYTHONPATH``): tensors created without a
device go to the GPU, so tests that build their inputs on the default device run braze's Triton
backend compiled for CUDA instead of the interpreter.

    PYTHONPATH=.:tools python -m pytest -q -p cuda_default tests/e2e -m "not slow" -k "not triton"

(``-k "not triton"``: the ``triton`` variant of a test sets ``TRITON_INTERPRET=1``, which would run the
interpreter on the GPU machine too; the ``cpp`` variant of a CUDA tensor is Triton compiled for the GPU.)
"""
import torch


def pytest_configure(config):
    if torch.cuda.is_available():
        torch.set_default_device("cuda")

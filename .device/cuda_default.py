"""pytest plugin (-p cuda_default): tensors created without a device go to the GPU, so tests that build
their inputs on the default device run braze's Triton backend on CUDA."""
import torch


def pytest_configure(config):
    if torch.cuda.is_available():
        torch.set_default_device("cuda")

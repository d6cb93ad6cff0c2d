#!/bin/sh
# braze's GPU tests under compute-sanitizer's memcheck, with every tensor its own allocation
# (PYTORCH_NO_CUDA_MEMORY_CACHING=1), so a read past a tensor is an error, not a neighbour's bytes.
# Runs on a machine with an NVIDIA GPU and the CUDA toolkit's compute-sanitizer on PATH:
# the GPU test files, then the numerics tests on CUDA tensors (-p cuda_default, tools/cuda_default.py).
# Usage: sh tools/memcheck.sh   (T1, T2: time limits in seconds of the two runs)
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH=.:tests:tools PYTHONUNBUFFERED=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 BRAZE_COMPILE_WORKERS=1
SAN="compute-sanitizer --tool memcheck --print-limit 10 --show-backtrace no"
timeout "${T1:-200}" $SAN python -m pytest -q -p no:cacheprovider tests/backends/test_triton_gpu.py tests/runtime/test_mixed_devices.py 2>&1 | grep -v "^  \|^$" | tail -15
timeout "${T2:-330}" $SAN python -m pytest -q -p no:cacheprovider -p cuda_default tests/e2e -m "not slow" -k "not triton" 2>&1 | grep -v "^  \|^$" | tail -25

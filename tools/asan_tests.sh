#!/bin/sh
# The C++ backend's kernels under AddressSanitizer: kernels built with -fsanitize=address
# (BRAZE_CXX_FLAGS, which the build cache keys on) in a Python that preloads libasan (and
# libstdc++, whose __cxa_throw ASan must find for torch's C++ exceptions), so every
# tensor torch allocates has redzones and a read or write past one stops the run with a
# report in /tmp/asanrep. The Triton tests are left out (BRAZE_TEST_TRITON=0).
# Usage: sh tools/asan_tests.sh [pytest arguments; default: tests]
cd "$(dirname "$0")/.." || exit 1
FLAGS=$(.venv/bin/python -c "from braze import config; print(config.cxx_flags)")
export BRAZE_CXX_FLAGS="$FLAGS -fsanitize=address -fno-omit-frame-pointer"
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so.6)"
export ASAN_OPTIONS=detect_leaks=0:log_path=/tmp/asanrep/asan BRAZE_CACHE_DIR=/tmp/braze-asan BRAZE_TEST_TRITON=0
mkdir -p /tmp/asanrep && rm -f /tmp/asanrep/asan.*
[ $# -gt 0 ] || set -- tests
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
status=$?
ls /tmp/asanrep/asan.* 2>/dev/null && echo "AddressSanitizer reports above" && exit 1
exit $status

"""The disk cache of compiled C++ kernel libraries: a second process compiling the same
graph runs no compiler, the cache directory is private (0700), and a corrupt (truncated)
library is rebuilt rather than loaded."""
import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest


SCRIPT = textwrap.dedent("""
    import json, torch, braze
    import braze.codegen.cpp.build as build
    calls = []
    original = build._compile
    build._compile = lambda *a: (calls.append(1), original(*a))[1]
    f = lambda x: torch.sin(x) ** 2 + torch.cos(x) * 3
    x = torch.arange(12.0)
    out = torch.compile(f, backend="braze")(x)
    assert torch.allclose(out, f(x))
    print(json.dumps({"compiler_runs": len(calls)}))
""")


def run_script(cache_dir):
    env = dict(os.environ, BRAZE_CACHE_DIR=str(cache_dir), BRAZE_STRICT="1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_second_process_runs_no_compiler_and_corrupt_entries_are_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    assert run_script(cache) == {"compiler_runs": 1}
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    assert run_script(cache) == {"compiler_runs": 0}
    libraries = [p for p in cache.iterdir() if p.suffix == ".so"]
    assert len(libraries) == 1
    libraries[0].write_bytes(libraries[0].read_bytes()[:100])  # truncate the cached library
    assert run_script(cache) == {"compiler_runs": 1}
    assert run_script(cache) == {"compiler_runs": 0}

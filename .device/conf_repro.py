"""Run conformance ops on CUDA one at a time (float32), printing each outcome with its sample."""
import sys
import torch  # noqa: F401
from conformance import pool
import os
BACKEND = os.environ.get("CONF_BACKEND", "cuda")
pool.setup_worker(BACKEND)
ops = pool.ops_by_key()
dtypes = sys.argv[1].split(",")
for key in sys.argv[2:]:
    res = pool.run_op(ops[key], dtypes, BACKEND)
    for dt, r in res.items():
        print(key, dt, r["outcome"], r.get("sample", ""), r.get("detail", "")[:400], flush=True)

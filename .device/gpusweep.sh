# The full OpInfo sweep on the GPU (BLOCKING=1: CUDA_LAUNCH_BLOCKING, so a fault surfaces in the
# op that caused it; BLOCKING=0 as users run), the problems found, then the GPU tests.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=.:tests:.device:/tmp/site PYTHONUNBUFFERED=1 BRAZE_COMPILE_WORKERS=1
CUDA_LAUNCH_BLOCKING=${BLOCKING:-0} timeout 420 python -m conformance.opinfo --backend cuda --jobs 14 --op-timeout 60 --quiet 2>&1 | tail -8
cp conformance/results/cuda* $OUT/
python - <<'PY'
import json
d = json.load(open("conformance/results/cuda.json"))["ops"]
for k, v in d.items():
    for dt, r in v.items():
        if r["outcome"] in ("error", "mismatch", "failed") or "harness" in str(r.get("detail")):
            print(k, dt, r["outcome"], r.get("sample", ""), str(r.get("detail", ""))[:600].replace("\n", " "))
PY
timeout 150 python -m pytest -q tests/test_triton_gpu.py tests/test_devices.py 2>&1 | tail -4

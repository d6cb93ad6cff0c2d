"""braze benchmarks: eager vs Inductor vs braze, side by side, in one run.

- ``benchmarks.workloads``: every workload (function, inputs, sizes per device).
- ``benchmarks.measure``: run-time timing (CPU wall clock with rotated inputs,
  GPU ``triton.testing.do_bench``), copy bandwidth, the correctness check.
- ``benchmarks.compile_time``: one cold- or warm-cache compile, in a subprocess.
- ``benchmarks.run``: the command: ``python -m benchmarks.run --device cpu``.
- ``benchmarks.schedule_scale``: braze's lower/inline/schedule on a ~5,000-node graph.
"""

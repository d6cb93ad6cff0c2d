"""braze benchmarks: eager vs Inductor vs braze, side by side, in one run.

- ``benchmarks.workloads``: every workload (function, inputs, sizes per device).
- ``benchmarks.measure``: run-time timing (CPU wall clock with rotated inputs,
  GPU ``triton.testing.do_bench``), copy bandwidth, the correctness check.
- ``benchmarks.compile_time``: one cold- or warm-cache compile, in a subprocess.
- ``benchmarks.run``: the command: ``python -m benchmarks.run --device cpu``.
- ``benchmarks.schedule_scale``: braze's lower/inline/schedule on a ~5,000-node graph.
- ``benchmarks.models``: whole models (GPT-2, LLaMA, BERT, ResNet-50, ViT) on a GPU.
- ``benchmarks.checks``: what the run-time index checks cost.
- ``benchmarks.knob_ab``: one knob's values on every workload, interleaved in one process.
- ``benchmarks.small_kernels``: CPU pointwise math on tensors too small for threads.

Focused GPU benchmarks behind single design choices (each prints a table; results
in docs/benchmarks.md under the topic named in its docstring):
- ``benchmarks.scan_variants``: scan kernel shapes (one chunk against a running value);
- ``benchmarks.layernorm_variants``: a LayerNorm row kernel's variance, four ways;
- ``benchmarks.column_sums``: column sums and ``var_mean`` over several shapes;
- ``benchmarks.split_fills``: how many programs a split reduction launches;
- ``benchmarks.random_numbers``: kernels that draw random numbers;
- ``benchmarks.launch_overhead``: host time per kernel launch.
"""

"""What the sweep knows about particular ops, each entry with its reason.

``NONDETERMINISTIC``: ops whose values cannot be compared with eager (random
numbers, uninitialized memory); their structure, shapes and dtypes still are.
``SKIP``: ops not run at all, with the reason (shown in the table).
``CAUSES``: tracking notes for known mismatches and failures, keyed by op (and
optionally ``op@dtype``), shown next to the outcome in the table.
"""
from __future__ import annotations

_RANDOM = "random numbers"
_UNINIT = "uninitialized memory"

NONDETERMINISTIC = {
    "bernoulli": _RANDOM, "cauchy": _RANDOM, "exponential": _RANDOM, "geometric": _RANDOM,
    "log_normal": _RANDOM, "multinomial": _RANDOM, "normal": _RANDOM, "normal.in_place": _RANDOM,
    "normal.number_mean": _RANDOM, "rand_like": _RANDOM, "randint": _RANDOM, "randint_like": _RANDOM,
    "randn": _RANDOM, "randn_like": _RANDOM, "uniform": _RANDOM,
    "nn.functional.alpha_dropout": _RANDOM, "nn.functional.dropout": _RANDOM,
    "nn.functional.dropout2d": _RANDOM, "nn.functional.dropout3d": _RANDOM,
    "nn.functional.feature_alpha_dropout.with_train": _RANDOM, "nn.functional.rrelu": _RANDOM,
    "nn.functional.fractional_max_pool2d": _RANDOM, "nn.functional.fractional_max_pool3d": _RANDOM,
    "svd_lowrank": _RANDOM, "pca_lowrank": _RANDOM,
    "empty": _UNINIT, "empty_like": _UNINIT, "empty_permuted": _UNINIT, "empty_strided": _UNINIT,
    "new_empty": _UNINIT, "new_empty_strided": _UNINIT,
}

SKIP: dict = {}

_LAYER_NORM_OF_ONE = ("eager is the inexact one: normalizing over one element makes the output the bias "
                      "whatever the input, so the exact gradient is 0, which braze's decomposition gives "
                      "(float64 within 1e-13); eager's fused kernel leaves a residue of about 1e-4")

CAUSES: dict = {
    "pow@float32": ("ill-conditioned: the exponent's gradient sums grad * a**b * log(a) over a broadcast "
                    "dimension, terms up to 1e8 that cancel to about 3e4, so float32 rounding of pow and of "
                    "the sum decides the last digits; at the flagged element braze is the closer to float64"),
    "native_layer_norm@float32": _LAYER_NORM_OF_ONE,
    "nn.functional.layer_norm@float32": _LAYER_NORM_OF_ONE,
}


def cause(key: str, dtype_name: str) -> str:
    return CAUSES.get(f"{key}@{dtype_name}") or CAUSES.get(key, "")

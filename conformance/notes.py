"""What the sweep knows about particular ops, each entry with its reason.

``NONDETERMINISTIC``: ops whose values cannot be compared with eager (random
numbers, uninitialized memory); their structure, shapes and dtypes still are.
``SKIP``: ops not run at all, with the reason (shown in the table).
``CAUSES``: tracking notes for known mismatches and failures, keyed by op (and
optionally ``op@dtype`` or ``op@dtype@backend``), shown next to the outcome in the table.
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

_ILL_CONDITIONED_POW = ("ill-conditioned: the exponent's gradient sums grad * a**b * log(a) over a broadcast "
                        "dimension, terms up to 1e8 that cancel to about 3e4, so float32 rounding of pow and of "
                        "the sum decides the last digits: each one's largest error against float64 is shown, and "
                        "neither is always the closer")
_LAYER_NORM_OF_ONE_CUDA = ("normalizing over one element makes the output the bias whatever the input, so the exact "
                           "gradient is 0; eager's CUDA kernel gives 0, braze's fused kernel a rounding residue "
                           "(1.4e-5 and 2.5e-5) that the exact expression cancels, scaled by rstd = 1/sqrt(eps) = 316")
_CLOSER = "braze is the closer to float64 (its largest error against a float64 run is below eager's, shown)"
_UNIQUE = ("refused on purpose (lower/data_sizes.py, values_decide_size): the backward sums the gradient at the unique "
           "indices, and aten._unique's result size depends on the values; torch 2.11 (CUDA and CPU) traced it with the "
           "fixed size (1,), from which braze would compute a wrong value gradient (0.05 against eager's 3.19 on the "
           "H100), so that backward graph runs through ATen")

CAUSES: dict = {
    "pow@float32": _ILL_CONDITIONED_POW,
    "__rpow__@float32": _ILL_CONDITIONED_POW,
    "native_layer_norm@float32": _LAYER_NORM_OF_ONE,
    "nn.functional.layer_norm@float32": _LAYER_NORM_OF_ONE,
    "native_layer_norm@float32@cuda": _LAYER_NORM_OF_ONE_CUDA,
    "nn.functional.layer_norm@float32@cuda": _LAYER_NORM_OF_ONE_CUDA,
    "__rmod__@int64@cuda": ("integer remainder by zero is undefined: eager's CPU kernel raises ZeroDivisionError, "
                            "its CUDA kernel returns 2**32 - 1, braze's 0. On the H100 the differing elements of "
                            "samples #3 to #5 are exactly their 1, 9 and 9 zero divisors"),
    "atanh@float32@cuda": "ill-conditioned near |x| = 1, where the gradient 1/(1 - x**2) is large; " + _CLOSER,
    "nn.functional.conv2d@float32@cuda": "the convolution runs through ATen (cuDNN) in both; " + _CLOSER,
    "linalg.householder_product@float32@cuda": _CLOSER,
    "index_fill@float32": _UNIQUE,
}


def cause(key: str, dtype_name: str, backend: str = "") -> str:
    return (CAUSES.get(f"{key}@{dtype_name}@{backend}") or CAUSES.get(f"{key}@{dtype_name}")
            or CAUSES.get(key, ""))

"""The OpInfo ops CI re-runs (``tests/e2e/test_opinfo_conformance.py``): at least one per lowering
family, chosen for small sample sets so the subset runs in a few minutes."""

CI_SUBSET = (
    # pointwise: unary float, rounding, predicates, integer/bool paths
    "exp", "log1p", "sigmoid", "floor", "isnan", "abs", "nn.functional.gelu",
    # binary and ternary, type promotion, comparisons, bitwise, logical
    "add", "mul", "div.floor_rounding", "remainder", "pow", "maximum", "eq", "bitwise_and",
    "logical_xor", "where", "clamp", "lerp", "addcmul",
    # casts
    "float", "to",
    # views
    "view", "permute", "transpose", "expand", "squeeze", "unsqueeze", "select", "as_strided",
    # reductions
    "sum", "mean", "amax", "argmax", "var", "any", "prod",
    # indexing and creation
    "cat", "constant_pad_nd", "gather", "index_select", "full", "arange", "scalar_tensor",
    # scatters and scans
    "scatter_add", "index_put", "cumsum",
    # decompositions braze fuses, externs
    "softmax", "nn.functional.layer_norm", "mm",
)

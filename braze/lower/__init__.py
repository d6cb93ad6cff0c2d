"""ATen FX graph -> braze Graph. Importing this package registers every rule."""
from braze import config
from braze.lower import (collectives, data_sizes, division, externs, indexing, pointwise, pooling, random,  # noqa: F401
                         reductions, scans, scatter, views)  # (registration)
from braze.lower.core import LOWERINGS, Lowerer, LoweringError, TensorValue, Unsupported, graph_device, register

__all__ = ["LOWERINGS", "Lowerer", "LoweringError", "TensorValue", "Unsupported", "graph_device", "register",
           "lower"]


def lower(gm, target, keep_padding: bool = True, group_matmuls: bool = False, through_aten: frozenset = frozenset()):
    """Lower ``gm`` for ``target`` (``braze.target.Target``, which the graph keeps for the
    later passes); returns ``(graph, fallback op names)``. ``keep_padding``: outputs may
    keep padded matrix product rows (not a backward's: its gradients reach the user).
    ``group_matmuls``: products of one left operand run as one (inference graphs).
    ``through_aten``: names of ATen graph nodes to call through ATen (as externs, not
    fallbacks) although a rule could lower them (``config.single_op_kernels``)."""
    lowerer = Lowerer(gm, target, keep_padding, group_matmuls and config.group_matmuls, through_aten)
    graph = lowerer.run()
    return graph, lowerer.fallbacks

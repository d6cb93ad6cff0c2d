"""ATen FX graph -> braze Graph. Importing this package registers every rule."""
from braze.lower import externs, indexing, pointwise, reductions, views  # noqa: F401  (registration)
from braze.lower.core import LOWERINGS, Lowerer, LoweringError, TensorValue, Unsupported, register

__all__ = ["LOWERINGS", "Lowerer", "LoweringError", "TensorValue", "Unsupported", "register", "lower"]


def lower(gm):
    """Lower ``gm``; returns ``(graph, fallback op names)``."""
    lowerer = Lowerer(gm)
    graph = lowerer.run()
    return graph, lowerer.fallbacks

"""braze's own exceptions, in a module every layer may import.

Gives: ``BrazeError``, raised where braze could not compile a graph and ``config.strict``
asks for an error instead of running the graph's ops through ATen. (Errors that belong to
one layer stay there: ``braze.lower.LoweringError``, the C++ ``CompileError``, the run-time
``CheckFailed`` that eager's exceptions are raised as.)
"""


class BrazeError(RuntimeError):
    """braze could not compile a graph (raised in strict mode)."""

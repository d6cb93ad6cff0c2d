"""braze's messages, through Python's ``logging``.

Takes: ``config.debug`` (``BRAZE_DEBUG``) and whatever the user configured with ``logging``
or torch's ``TORCH_LOGS``. Gives: the loggers braze writes to, all under ``braze`` and named
after the package that speaks, so that ``TORCH_LOGS`` (which accepts module names) and
standard handlers and levels select them:

    braze.compiler  INFO   one line per compiled graph; notes on a graph (a native fast path)
                    DEBUG  a graph loaded from the graph cache
    braze.backend   INFO   a graph run eagerly, and why (also a warning, once per message)
    braze.fuse      DEBUG  kernels, inlining decisions, every considered fusion
    braze.codegen   DEBUG  generated source and wrapper; C++ compiler runs and their times

``follow_debug_knob()`` maps the knob onto levels, as the knob has always meant: 1 sets
``braze`` to INFO, 2 to DEBUG but ``braze.codegen`` to INFO, 3 everything to DEBUG; back
at 0, braze leaves the levels to the user again. Where no handler would show the records
(no handler on ``braze``, its parents or the root), it adds one that writes the bare
message to stderr.
"""
from __future__ import annotations

import logging
import sys

from braze import config

ROOT = logging.getLogger("braze")
CODE = logging.getLogger("braze.codegen")

_applied = 0  # the debug level whose logger levels braze set last
_handler: logging.Handler | None = None


def follow_debug_knob() -> None:
    """Set the ``braze`` loggers' levels from ``config.debug`` when it changed since the last call."""
    global _applied
    level = max(0, int(config.debug or 0))
    if level == _applied:
        return
    if level == 0:
        ROOT.setLevel(logging.NOTSET)
        CODE.setLevel(logging.NOTSET)
        _remove_handler()
    else:
        ROOT.setLevel(logging.INFO if level == 1 else logging.DEBUG)
        CODE.setLevel(logging.DEBUG if level >= 3 else logging.INFO)
        _ensure_handler()
    _applied = level


GRAPHS = logging.getLogger("braze.compiler")
FUSION = logging.getLogger("braze.fuse")


def enabled() -> bool:
    """Would a braze logger show anything of a compiled graph (by the knob, or by the
    user's own levels)?"""
    follow_debug_knob()
    return (GRAPHS.isEnabledFor(logging.INFO) or FUSION.isEnabledFor(logging.DEBUG)
            or CODE.isEnabledFor(logging.DEBUG))


def _ensure_handler() -> None:
    global _handler
    if _handler is None and not ROOT.hasHandlers():
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("%(message)s"))
        ROOT.addHandler(_handler)


def _remove_handler() -> None:
    global _handler
    if _handler is not None:
        ROOT.removeHandler(_handler)
        _handler = None

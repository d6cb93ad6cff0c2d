"""What Dynamo did around braze: graph breaks and recompile limits, for ``braze.explain``.

Takes: nothing; used as ``with DynamoNotes() as notes:`` around a compile, and told the
graphs Dynamo hands the backend (``notes.saw(gm)``). Gives: ``notes.lines``, one
sentence per event, each saying what happened and why:

- a graph break: Dynamo's reason (its first line and its explanation), where it happened
  when a graph ended there (``GraphCompileReason.user_stack`` of the graph before it);
  counted from ``torch._dynamo.utils.counters["graph_break"]``, which every torch from 2.0
  keeps, keyed by the reason's text;
- a recompile limit hit (the function then runs without braze, eagerly): from the warning
  Dynamo logs under ``torch._dynamo`` ("hit config.recompile_limit (8)", with the function
  and the last reason for recompiling), and, where a torch words that warning otherwise,
  from the ``counters["unimplemented"]`` entry it leaves.
"""
from __future__ import annotations

import collections
import logging
import re

from torch._dynamo.utils import counters

_LIMIT = re.compile(r"hit config\.(\w+) \((\d+)\)")


class DynamoNotes(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list = []
        self.limits: list = []  # Dynamo's warnings of a recompile limit hit
        self.where: dict = {}  # graph break reason -> "file:line in function"

    def __enter__(self):
        self.breaks = collections.Counter(counters["graph_break"])
        self.unimplemented = collections.Counter(counters["unimplemented"])
        logging.getLogger("torch._dynamo").addHandler(self)
        return self

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if _LIMIT.search(message):
            self.limits.append(message)

    def saw(self, gm) -> None:
        """A graph Dynamo hands the backend: where it ended, if a graph break ended it."""
        reason = getattr(gm, "compile_subgraph_reason", None)
        if reason is not None and getattr(reason, "graph_break", False) and reason.user_stack:
            frame = reason.user_stack[-1]
            self.where[reason.reason] = f"{frame.filename}:{frame.lineno} in {frame.name}"

    def __exit__(self, *exc) -> None:
        logging.getLogger("torch._dynamo").removeHandler(self)
        for reason in counters["graph_break"] - self.breaks:
            where = self.where.get(reason)
            self.lines.append(f"graph break{f' at {where}' if where else ''}: {_summary(reason)}")
        for message in self.limits:
            self.lines.append(_limit_line(message))
        if not self.limits:
            for reason in counters["unimplemented"] - self.unimplemented:
                if "recompile limit" in reason or "cache_size_limit" in reason:
                    self.lines.append(f"recompile limit hit: the function runs eagerly, without braze, "
                                      f"from then on: {_summary(reason)}")


def _summary(reason: str) -> str:
    """Dynamo's reason, short: its first line and its explanation."""
    lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
    explanation = next((line for line in lines[1:] if line.startswith("Explanation:")), "")
    return lines[0] + (f" ({explanation[len('Explanation:'):].strip()})" if explanation else "") if lines else ""


def _limit_line(message: str) -> str:
    found = _LIMIT.search(message)
    details = {key: line.split(":", 1)[1].strip() for line in message.splitlines()
               for key in ("function", "last reason") if line.strip().startswith(f"{key}:")}
    function = f" for {details['function']}" if "function" in details else ""
    reason = f"; last reason to recompile: {details['last reason']}" if "last reason" in details else ""
    return (f"recompile limit hit: config.{found.group(1)} ({found.group(2)}){function}: it runs eagerly, "
            f"without braze, from then on{reason}")

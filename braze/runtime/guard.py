"""The first-call guard: a compiled graph whose first run raises runs eagerly.

Takes: a ``CompiledGraph``, the FX graph it was compiled from, its kind, and a
``report(kind, message)`` callback (the backend's warn-once-and-notify). Gives: a
boxed callable. Its first call runs the compiled graph; when that raises (a
kernel that fails at launch: out of shared memory, an interpreter error, a bad
extern call), the inputs the graph mutates are restored, the graph reruns
eagerly, the failure is reported, and every later call runs eagerly; an error of the
program that a run-time check found (``checks.CheckFailed``) propagates as it is. Under
``config.strict`` (read when the graph is compiled) it raises ``BrazeError``
naming the failing kernel or op instead, chaining the original error.

Inputs the graph mutates are found in the FX graph: every argument that an
op's schema marks as written (``Tensor(a!)``: AOTAutograd's ``copy_`` into an
input, an in-place fallback), followed back through views and in-place ops to
the placeholder it aliases. That set is exact for eager and covers whatever
the compiled wrapper writes, since braze only writes where the graph does.
Those inputs alone are cloned before the first run and copied back after a
failure, so an update (an optimizer step, BatchNorm statistics) is applied once.

After the first call the callable runs the compiled graph with no check: a
closure whose cell is rebound, as cheap as a plain boxed call. With
``config.guards`` off (read when the graph is compiled; unsafe, a test aid) the
first call is not guarded either: nothing is cloned and its error propagates.
"""
from __future__ import annotations

import re
import traceback

import torch
from torch._functorch.aot_autograd import make_boxed_func

from braze import config
from braze.errors import BrazeError
from braze.runtime.checks import CheckFailed


def guarded(compiled, gm: torch.fx.GraphModule, kind: str, report):
    """``compiled`` as a boxed callable whose first call is guarded."""
    strict = config.strict
    if not config.guards:
        def unguarded(args):
            return compiled.run(args)
        unguarded._boxed_call = True
        unguarded.compiled = compiled
        return unguarded

    def call(args):
        return run(args)

    def first(args):
        nonlocal run
        result, run = _first_run(compiled, gm, kind, strict, report, args)
        return result

    run = first
    call._boxed_call = True
    call.compiled = compiled
    return call


def _first_run(compiled, gm, kind: str, strict: bool, report, args) -> tuple:
    """The first call's result, and what later calls should run. When eager fails
    too, its error is the program's own: it propagates and the guard stays armed."""
    saved = _snapshot(args, mutated_inputs(gm))
    try:
        return compiled.run(list(args)), compiled.run  # a copy: the run may clear its list
    except CheckFailed:
        _restore(args, saved)
        raise
    except Exception as exc:
        _restore(args, saved)
        message = f"{failing_step(compiled, exc)} failed at its first run: {type(exc).__name__}: {exc}"
        if strict:
            raise BrazeError(message) from exc
        eager = make_boxed_func(gm.forward)
        result = eager(args)
        report(kind, message)
        return result, eager


def mutated_inputs(gm: torch.fx.GraphModule) -> list[int]:
    """Positions of the placeholders that some op of ``gm`` writes into."""
    placeholders = {n: k for k, n in enumerate(gm.graph.find_nodes(op="placeholder"))}
    found = set()
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        for position, argument in enumerate(node.target._schema.arguments):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            value = node.args[position] if position < len(node.args) else node.kwargs.get(argument.name)
            for written in value if isinstance(value, (list, tuple)) else [value]:
                base = _base(written)
                if base in placeholders:
                    found.add(placeholders[base])
    return sorted(found)


def _base(value):
    """The node ``value`` aliases: followed through ops whose first output aliases
    their first argument (views, in-place ops)."""
    while isinstance(value, torch.fx.Node) and value.op == "call_function" and value.args \
            and isinstance(value.target, torch._ops.OpOverload):
        schema = value.target._schema
        if not (schema.arguments and schema.returns and schema.arguments[0].alias_info is not None
                and schema.returns[0].alias_info is not None):
            break
        value = value.args[0]
    return value


def _snapshot(args, positions: list) -> dict:
    with torch.no_grad():
        return {k: args[k].clone() for k in positions if isinstance(args[k], torch.Tensor)}


def _restore(args, saved: dict) -> None:
    with torch.no_grad():
        for k, value in saved.items():
            args[k].copy_(value)


def failing_step(compiled, exc: Exception) -> str:
    """The kernel (with its ATen ops) or extern op on the wrapper line that raised;
    the wrapper line itself when it is neither, the graph's name when no line did."""
    filename = f"<braze {compiled.name}>"  # as compiler.compile_graph names the wrapper
    lines = [n for frame, n in traceback.walk_tb(exc.__traceback__) if frame.f_code.co_filename == filename]
    if not lines:
        return compiled.name
    text = compiled.wrapper.splitlines()[lines[-1] - 1].strip()
    for kernel in compiled.kernels:
        if re.search(rf"\b{kernel.name}\b", text):
            return f"{kernel.name} ({', '.join(dict.fromkeys(kernel.ops))})"
    op = re.search(r"torch\.ops\.(\w+\.\w+\.\w+)", text)
    return op.group(1) if op else f"{compiled.name}: {text}"

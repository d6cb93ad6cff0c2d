"""``braze.explain``: what braze does with a function, for given arguments.

Takes: a function or module and example arguments. Gives: ``Report``: the
compiled graphs (forward, backward or inference), their kernels (each with the
ATen ops fused into it and its backend), extern and fallback ATen calls,
inlining decisions and the fusion log (every pair considered, with its reason),
and a readable table as ``str(report)``.

If an output requires grad, explain also runs a backward pass (with
``torch.autograd.grad``, so no ``.grad`` of the caller's tensors changes) to
compile and report the backward graph.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.utils._pytree as pytree

from braze import backend as _backend
from braze.fuse.legality import Reason


@dataclass
class Report:
    graphs: list = field(default_factory=list)
    failures: list = field(default_factory=list)  # (kind, message) of graphs run eagerly

    @property
    def kernels(self) -> list:
        return [k for g in self.graphs for k in g.kernels]

    @property
    def externs(self) -> list:
        return [e for g in self.graphs for e in g.externs]

    @property
    def fallbacks(self) -> list:
        return [f for g in self.graphs for f in g.fallbacks]

    @property
    def fusion_log(self) -> list:
        return [r for g in self.graphs for r in g.fusion_log]

    def graph(self, kind: str):
        """The first graph of a kind: 'forward', 'backward' or 'inference'."""
        return next(g for g in self.graphs if g.kind == kind)

    def kernels_of(self, kind: str) -> list:
        return [k for g in self.graphs if g.kind == kind for k in g.kernels]

    def why_not_fused(self, first: str, second: str) -> list:
        """Fusion-log verdicts for a pair of buffers (in either order)."""
        return [r for r in self.fusion_log if {r.first, r.second} == {first, second}]

    def __str__(self) -> str:
        lines = [f"braze: {len(self.graphs)} graph(s), {len(self.kernels)} kernel(s), "
                 f"{len(self.externs)} extern call(s), {len(self.fallbacks)} fallback(s)"]
        for g in self.graphs:
            stored = sum(d.stored for d in g.decisions)
            fused = sum(r.fused for r in g.fusion_log)
            lines.append(f"\n{g.name} ({g.kind}): {g.node_count} nodes after inlining, "
                         f"{stored} buffers stored, {len(g.decisions) - stored} inlined, "
                         f"{fused} fusions, compiled in {sum(g.timings.values()):.1f} ms")
            lines.append(f"  {'kernel':10} {'backend':8} {'shape':10} ATen ops")
            for k in g.kernels:
                lines.append(f"  {k.name:10} {k.backend:8} {k.shape:10} {', '.join(k.ops)}")
            for e in g.externs:
                lines.append(f"  {'extern':10} {'aten':8} {'':10} {e}")
            for f in g.fallbacks:
                lines.append(f"  {'fallback':10} {'aten':8} {'':10} {f}")
            for k, site in enumerate(getattr(g, "checks", [])):
                what = "divisor != 0" if site.kind == "divisor" else \
                    f"index into dim {site.dim} of {list(site.shape)}, size {site.size}"
                lines.append(f"  check {k}: {site.op}: {what} (raises {site.exception})")
            refused = [r for r in g.fusion_log if not r.fused and r.reason is not Reason.SAME_KERNEL]
            for r in refused[:8]:
                lines.append(f"  not fused: {r.first} + {r.second}: {r.reason.value}"
                             f"{f' ({r.detail})' if r.detail else ''}")
            if len(refused) > 8:
                lines.append(f"  ... {len(refused) - 8} more refused pairs in .fusion_log")
        for kind, message in self.failures:
            lines.append(f"\n{kind} graph ran eagerly: {message}")
        return "\n".join(lines)


def explain(fn, *args, **kwargs) -> Report:
    report = Report()

    def backend(gm, example_inputs):  # a fresh backend: Dynamo compiles anew for it
        return _backend.braze_backend(gm, example_inputs)

    with _backend.Recording() as recording:
        out = torch.compile(fn, backend=backend)(*args, **kwargs)
        _backward(out, fn, args, kwargs)
    report.graphs += recording.graphs
    report.failures += [f[1:] for f in recording.failures]
    return report


def _backward(out, fn, args, kwargs) -> None:
    outputs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
    leaves = _autograd_leaves(outputs)
    if outputs and leaves:
        torch.autograd.grad(outputs, leaves, [torch.ones_like(t) for t in outputs], allow_unused=True)


def _autograd_leaves(outputs) -> list:
    """Every leaf tensor the outputs depend on (closure-captured parameters too)."""
    leaves, seen, stack = [], set(), [t.grad_fn for t in outputs if t.grad_fn is not None]
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        variable = getattr(fn, "variable", None)
        if isinstance(variable, torch.Tensor):
            leaves.append(variable)
        stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return leaves

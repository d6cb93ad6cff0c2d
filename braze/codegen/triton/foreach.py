"""Foreach kernels: many independent pointwise plans in one launch (an optimizer step).

Takes: a foreach ``KernelPlan`` (``plan.parts``: independent pointwise plans that
``braze.compiler`` bundled) and the device's ``DeviceInfo``. Gives: ``split``, the
plans to generate for it (foreach plans of at most ``config.foreach_max_parts``
parts whose kernels are plain 1-D pointwise; every other part as a plan of its
own), and ``TritonForeach``, the ``@triton.jit`` function of one foreach plan.

The kernel's 1-D grid is the concatenation of its parts' blocks: programs
``[0, end0)`` run part 0, ``[end0, end1)`` part 1, and so on; each part is one
``if`` on that range, holding the masked body of the part's own pointwise
kernel (``TritonKernel.pointwise_body``) at its local block index. One
``XBLOCK`` serves every part (``shapes.foreach``); the ends are constexprs
computed from it, so the text does not depend on the launch configuration. A
part whose positions reach 2**31 indexes in int64, the others in int32.

Values that depend on no loop variable (a scalar's loads and the math on them:
Adam's bias corrections, two ``pow``) are computed once, ahead of the parts, as
the C++ foreach does. Compile time grows faster than the number of parts
(ptxas, mostly: each IEEE division has a slow path; docs/benchmarks.md,
"Where compile time goes"), hence
``config.foreach_max_parts``; groups of equal text (same sizes, same math) are
one module. Flat ``if``s, not an ``elif`` chain: nested regions made Triton's
own passes several times slower on 32 parts.
"""
from __future__ import annotations

from dataclasses import replace

from braze import config
from braze.codegen.emitter import PYTHON_INDENT, Emitter
from braze.codegen.triton.exprs import Printer
from braze.codegen.triton.kernel import TritonKernel, parameters, size_parameters
from braze.codegen.triton.shapes import INTERPRETER, DeviceInfo, cdiv, choose, foreach
from braze.fuse.kernel import foreach_plan
from braze.ir import dtypes
from braze.ir import symbols
from braze.ir.expr import Op, walk

# The most buffers of one foreach kernel: 400 pointers are 3.2 KB of the 4 KB of
# parameters a CUDA kernel took before CUDA 12.1.
MAX_PARAMS = 400


def split(plan, device: DeviceInfo) -> list:
    """The plans to generate for a foreach plan, each part in exactly one: foreach plans
    over runs of 1-D pointwise parts, then the parts with another shape (a transpose's
    tiles) or left alone in their run, as plain plans."""
    pointwise, others = [], []
    for part in plan.parts:
        (pointwise if choose(part, device).name == "pointwise" else others).append(part)
    groups = _groups(pointwise, config.foreach_max_parts)
    if len(groups) == 1 and len(groups[0]) == len(plan.parts):
        return [plan]
    runs = [foreach_plan(f"{plan.name}_f{k}", g) for k, g in enumerate(groups) if len(g) > 1]
    return runs + [g[0] for g in groups if len(g) == 1] + others


def _groups(parts: list, most: int) -> list:
    """``parts`` in consecutive runs of about equal length: at most ``most`` parts and
    ``MAX_PARAMS`` buffers each."""
    if not parts:
        return []
    length = cdiv(len(parts), cdiv(len(parts), max(1, most)))
    groups, buffers = [], set()
    for part in parts:
        names = set(part.reads) | set(part.writes)
        if not groups or len(groups[-1]) == length or len(buffers | names) > MAX_PARAMS:
            groups.append([])
            buffers = set()
        groups[-1].append(part)
        buffers |= names
    return groups


class TritonForeach:
    """The one function of a foreach plan; the interface of ``TritonKernel`` (buffers,
    parameter names, shape, helpers, constexprs per function, no workspaces)."""

    def __init__(self, plan, device: DeviceInfo):
        self.plan, self.interpreted = plan, device is INTERPRETER
        self.shape = foreach(plan.parts, device)
        self.params = parameters(plan)
        self.buffers = list(self.params)
        self.workspaces: list = []
        self.constexprs = [["XBLOCK"]]
        self.run_time: dict = {}  # (no constexpr decided at a call: ``kernel.TritonKernel.run_time``)
        self.helpers: set = set()
        self.parts = [TritonKernel(part, choose(part, device), self.params, self.interpreted) for part in plan.parts]

    def source(self, name: str) -> str:
        args = [self.params[b] for b in self.buffers] + size_parameters(self.interpreted) \
            + ["XBLOCK: tl.constexpr"]
        em = Emitter(PYTHON_INDENT, ["@triton.jit", f"def {name}({', '.join(args)}):"])
        em.emit_lines("    ", ["pid = tl.program_id(0)", "# part k runs on programs [end{k-1}, end{k})"])
        for k, part in enumerate(self.parts):
            start = f"end{k - 1} + " if k else ""
            numel = part.plan.outer_numel()
            constant = "" if symbols.is_symbolic(numel) and not self.interpreted else ": tl.constexpr"
            em.emit("    ", f"end{k}{constant} = {start}({symbols.text_of(numel, 'python')} + XBLOCK - 1) // XBLOCK")
        known = self._hoist(em)
        for k, part in enumerate(self.parts):
            programs = f"(pid >= end{k - 1}) & (pid < end{k})" if k else "pid < end0"
            em.emit("    ", f"if {programs}:  # part {k}: {self._describe(part)}")
            em.emit_lines("", part.pointwise_body(_block_of(k, part.shape.wide), "        ", known, em.counter))
            self.helpers |= part.helpers
        return em.text()

    def _hoist(self, em: Emitter) -> dict:
        """Print the parts' invariant values into ``em``; returns them (``Term`` by ``id``
        of the expression), for the parts to read (their temporaries go on with ``em``'s
        counter)."""
        wide = any(part.shape.wide for part in self.parts)
        context = TritonKernel(self.plan, replace(self.shape, wide=wide), self.params, self.interpreted)
        printer = Printer(context, em, "    ")
        invariants = _invariants(self.parts)
        if invariants:
            em.emit("    ", "# computed once for every part")
        for e in invariants:
            printer(e)
        self.helpers |= context.helpers
        return {id(e): printer.memo[id(e)] for e in invariants}

    def _describe(self, part: TritonKernel) -> str:
        written = ", ".join(self.params[b] for b in part.plan.writes)
        return f"{part.plan.outer_numel()} elements to {written}"


def _invariants(parts: list) -> list:
    """The values (not index arithmetic, not constants) of the parts' expressions that
    depend on no loop variable, no value computed in the kernel and no guarded load (one
    read only where a ``where``'s branch is taken), children first."""
    guarded = {load for part in parts for load in part.guards}
    nodes = walk([e for part in parts for e in part.plan.expressions()])
    invariant: dict = {}
    for e in nodes:
        invariant[id(e)] = (e.op not in (Op.VAR, Op.VALUE) and id(e) not in guarded
                            and all(invariant[id(a)] for a in e.args))
    return [e for e in nodes if invariant[id(e)] and e.op is not Op.CONST and e.dtype is not dtypes.INDEX]


def _block_of(k: int, wide: bool) -> str:
    """Part ``k``'s own block index, from the program id."""
    block = f"(pid - end{k - 1})" if k else "pid"
    return f"{block}.to(tl.int64)" if wide else block

"""What the passes may know about the machine a graph runs on: one ``Target`` per compile.

Takes: nothing at import (it imports no other braze module, so every layer may import it).
Gives: ``Target``, the seam between the pipeline and the code generators. A target is built
once per graph, before lowering (``braze.codegen.target_for(device)``), and the passes ask it
instead of asking which device or backend they are on (what eager itself does differently
on each device, as raising for an integer division by zero on the CPU only, is asked of the
device, not the target):

- device facts: ``name``, ``device``, ``fill`` (programs that fill a GPU, two per SM; 0 where
  threads take whole rows, as in C++), ``threads``;
- inlining: ``op_costs``, what recomputing each op costs per element, in adds;
- lowering: ``scatter_adds(dtype)``, ``scans_rows(rows, length)``;
- fusion: ``column_sums`` (sums over rows may join a row kernel), ``gathers_slowly`` and
  ``veto(nodes, nest, graph)``, a target's own refusals with a reason from the fusion log's
  vocabulary;
- code: ``compile(plans)``, the generated kernels (``braze.codegen.Built``).

The C++ and Triton targets (``braze.codegen.cpp.policy``, ``braze.codegen.triton.policy``)
hold their heuristics; ``ir/``, ``lower/`` and ``fuse/`` import nothing from ``braze.codegen``.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Target:
    """The defaults describe a target with no special abilities; code generators subclass it."""
    name: str = "none"
    device: object = None  # torch.device
    fill: int = 0
    threads: int = 1
    op_costs: dict = field(default_factory=dict)  # Op -> cost per element (missing: 1)
    column_sums: bool = False  # a sum over the rows may join a row kernel (per-thread partials)
    supports_foreach: bool = False  # many small kernels in one launch
    takes_sizes: bool = False  # kernels take symbolic sizes as arguments (``ir/symbols.py``)

    def scatter_adds(self, dtype) -> bool:
        """Can kernels add at scattered positions into ``dtype`` (a scatter_add, index_put
        with accumulate)?"""
        return False

    def scans_rows(self, rows: int, length: int) -> bool:
        """Is a cumulative op over ``rows`` rows of ``length`` worth a kernel here (rather than
        ATen's)?"""
        return True

    def gathers_slowly(self, outer: int, reduce: int) -> bool:
        """Would a reduction of ``outer`` rows of ``reduce`` elements that loads at loaded
        indices wait on its gathers chunk after chunk?"""
        return False

    def veto(self, nodes, nest, graph):
        """This target's refusal of one candidate kernel (a ``braze.fuse.legality.Verdict``),
        or None."""
        return None

    def compile(self, plans):
        raise NotImplementedError(f"target {self.name} generates no code")

"""Inlining: which buffers are stored, which are recomputed in their readers.

Takes: a lowered ``Graph``. Gives: the same graph with every compute node either
realized (``layout`` set, kept) or inlined (removed, its body substituted into
each reader), dead nodes dropped, and ``decisions``: for each compute node, why
it was stored or inlined. This is the only place such a decision is made.

The cost model, in order:
- stored: reductions, graph outputs, inputs of ATen calls, writes into inputs;
- dropped: nothing reads it;
- stored (Triton only): an expression that gathers (loads at indices it loads), read
  by a reduction of few long rows (``legality.slow_gather_rows``): each program would
  wait for its gathers chunk after chunk. A loss's per-row pick from the logits, read
  by its mean, is stored by the kernel that computed the rows' max and sum;
- inlined: read at one index by one reader, or only by pointwise readers at the
  element they compute whose values all end in one expression (``t = tanh(x);
  (t + 1) * (1 - t * t)`` computes ``t`` once), unless its expression has grown
  past ``config.inline_max_body`` ops;
- stored: read at several indices or by several readers, its value compared for
  equality (``amax``'s backward: ``input == result``): two loops recomputing it need not
  round alike (in C++ one may call libmvec's vector ``sin``, the other libm's), and a
  maximum that matches no element gives a gradient of 0 / 0;
- stored: read at several indices or by several readers and loading more than
  ``config.inline_max_loads`` buffers of its own size (a chain of gradient sums
  through residual connections): readers in other kernels would each re-read them;
- inlined: read at several indices or by several readers, if recomputing it costs
  at most ``config.inline_max_ops`` cheap ops (an add or a multiply), each op
  weighed by what it costs on the graph's device (``op_cost``);
- stored otherwise: recomputing it would cost more than a load. Readers that
  land in the same kernel as a stored buffer take its value without a load.

Op costs (``op_cost``). On a CPU the vector math (glibc's libmvec) costs tens of
cheap ops per element; on one AVX2 core (fp32, in L2), in adds: divide 3,
sqrt 6, rsqrt 12, exp/log/sin/cos/atan 21-25, erf/sigmoid/log1p/tanh/expm1 29-47,
pow 140, lgamma/digamma/erfinv (scalar code) 490-1600; an element written to
memory and read back costs about 20. So a buffer holding such an op that two
kernels would each recompute is cheaper stored (an MLP backward's GELU
derivative, read by its row and its column reductions); ``exp(x - max)`` of a
softmax, read by one row kernel that keeps it, stays inlined. On a GPU a load
costs about 100 flops and libdevice's exp, log, erf take 10-35 instructions per element:
recomputing is cheap, and each costly op counts 4; but sin, cos, tan, acosh and lgamma
take 87-309 (their slow argument reductions are inlined for every element a thread
handles; PTX for sm_90, Triton 3.6), and the code size is compile time: LLaMA's rotary
kernel recomputing sin and cos of its angle table was by far its graph's slowest kernel
to compile (docs/benchmarks.md, "Where compile time goes"). They count 25, over ``inline_max_ops``:
a buffer holding one, read by several kernels, is stored. A random number (``Op.RANDOM``:
Philox's 10 rounds, about 100 integer instructions) counts 25 on both. Costly ops count 4 on a CPU too in a
buffer of one element (Adam's bias corrections): each kernel that reads it computes
it once, hoisted out of its loops, where storing it would take a kernel of its own.
"""
from __future__ import annotations

from dataclasses import dataclass

from braze import config
from braze.fuse.legality import gathers, program_fill, slow_gather_rows
from braze.ir.expr import EXPENSIVE, LEAVES, Expr, Op, op_count, rewrite, store_cast, substitute, walk
from braze.ir.graph import ComputeNode, ExternNode, Graph, Layout, out_vars


_CPU_COST = {
    **dict.fromkeys(EXPENSIVE, 4), Op.RECIPROCAL: 4, Op.RSQRT: 12,
    **dict.fromkeys((Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.LOG10, Op.SIN, Op.COS, Op.TAN, Op.ASIN,
                     Op.ACOS, Op.ATAN, Op.SINH, Op.COSH, Op.HYPOT), 20),
    **dict.fromkeys((Op.ERF, Op.ERFC, Op.TANH, Op.SIGMOID, Op.EXPM1, Op.LOG1P, Op.ATAN2, Op.ASINH,
                     Op.ACOSH, Op.ATANH), 40),
    **dict.fromkeys((Op.POW, Op.LGAMMA, Op.DIGAMMA, Op.ERFINV), 100),
    Op.RANDOM: 25,  # Philox: 10 rounds of 2 high and 2 low products, 4 xors, 2 adds; by SIMD lanes
}


_GPU_COST = {**dict.fromkeys(EXPENSIVE, 4),
             **dict.fromkeys((Op.SIN, Op.COS, Op.TAN, Op.ACOSH, Op.LGAMMA, Op.RANDOM), 25)}


def op_cost(body: Expr, device, numel: int) -> int:
    """Cheap ops (adds, multiplies) that recomputing ``body``, a buffer of ``numel``
    elements, costs per element on ``device`` (for one element, or no device:
    ``op_count``'s flat weights)."""
    if device is None or numel <= 1:
        return op_count(body)
    costs = _CPU_COST if device.type == "cpu" else _GPU_COST
    return sum(costs.get(n.op, 1) for n in walk(body) if n.op not in LEAVES)


@dataclass(frozen=True)
class Decision:
    node: str
    stored: bool
    reason: str


def inline(graph: Graph) -> list[Decision]:
    uses = _count_uses(graph)
    sites = _sites(graph, uses)
    gathered_slowly = _read_by_few_long_rows(graph)
    compared = _compared(graph)
    bodies: dict[str, Expr] = {}  # final body of each inlined node
    decisions: list[Decision] = []
    kept = []
    for node in graph.nodes:
        if isinstance(node, ComputeNode):
            node.origins = _merged_origins(node, bodies, graph)
            node.body = _substitute_inlined(node.body, bodies, graph)
            stored, reason = _decide(node, sites[node.name], graph, node.name in gathered_slowly,
                                     node.name in compared)
            decisions.append(Decision(node.name, stored, reason))
            if not stored:
                if uses.get(node.name, 0):
                    bodies[node.name] = node.body
                continue
            if node.layout is None:
                node.layout = node.preferred or Layout.contiguous(node.sizes)
        kept.append(node)
    graph.nodes = kept
    graph.by_name = {}
    for node in kept:
        graph.add_name(node)
    _drop_dead(graph, decisions)
    return decisions


def _count_uses(graph: Graph) -> dict[str, int]:
    """Distinct reads of each buffer (a buffer read at three indices counts three)."""
    uses: dict[str, int] = {}
    for node in graph.nodes:
        if isinstance(node, ComputeNode):
            for e in walk(node.body):
                if e.op is Op.LOAD:
                    uses[e.arg] = uses.get(e.arg, 0) + 1
        else:
            for name in node.reads():
                uses[name] = uses.get(name, 0) + 1
    for out in graph.outputs:
        if out.buffer is not None:
            uses[out.buffer] = uses.get(out.buffer, 0) + 1
    return uses


def _sites(graph: Graph, uses: dict) -> dict[str, int]:
    """Per compute node, how many times it would be computed if it were inlined: its
    reads, or 1 where they all end in one expression (see the module docstring)."""
    readers: dict[str, list] = {}  # buffer -> a reader per read, None if not at its element
    for node in graph.nodes:
        if isinstance(node, ComputeNode):
            at_element = None if node.is_reduction else out_vars(node.sizes)
            for e in walk(node.body):
                if e.op is Op.LOAD:
                    readers.setdefault(e.arg, []).append(node if e.args == at_element else None)
    sites: dict[str, int] = {}
    ends: dict[str, str] = {}  # node -> the node whose expression its value ends in
    for node in reversed(graph.nodes):
        if isinstance(node, ComputeNode):
            rs, n = readers.get(node.name, []), uses.get(node.name, 0)
            together = len(rs) == n and None not in rs
            found = {ends[r.name] for r in rs} if together else set()
            sites[node.name] = len(found) if together else n
            single = len(found) == 1 and not (node.pinned or node.is_reduction)
            ends[node.name] = found.pop() if single else node.name
    return sites


def _read_by_few_long_rows(graph: Graph) -> set:
    """Buffers read by a reduction of few long rows (``slow_gather_rows``; none on the C++
    backend)."""
    fill = program_fill(graph)
    found: set = set()
    for node in graph.nodes:
        if isinstance(node, ComputeNode) and node.is_reduction \
                and slow_gather_rows(node.numel, node.reduction.numel, fill):
            found.update(node.reads())
    return found


def _compared(graph: Graph) -> set:
    """Float buffers whose value reaches an operand of an equality comparison (``amax``'s
    backward: ``input == result``), directly or through the nodes computed from them."""
    found: set = set()
    for node in reversed(graph.nodes):
        if not isinstance(node, ComputeNode):
            continue
        for e in walk(node.body):
            if e.op in (Op.EQ, Op.NE):
                found.update(x.arg for operand in e.args for x in walk(operand) if x.op is Op.LOAD)
        if node.name in found:
            found.update(node.reads())
    return {name for name in found if isinstance(graph.producer(name), ComputeNode)
            and graph.producer(name).dtype.is_floating_point}


def _decide(node: ComputeNode, uses: int, graph: Graph, read_by_few_long_rows: bool,
            compared: bool = False) -> tuple[bool, str]:
    if node.is_reduction:
        return True, "reduction"
    if node.pinned:
        return True, node.pinned
    if uses == 0:
        return False, "unused"
    if read_by_few_long_rows and gathers(node.body):
        return True, "gathers for a reduction of few long rows"
    size = op_count(node.body)
    if size > config.inline_max_body:
        return True, f"expression of {size} ops is too large to recompute"
    if uses == 1:
        return False, "read once"
    if compared:  # one value for every reader: recomputed in two loops, it may round differently
        return True, f"read {uses} times, compared for equality"
    loads = _full_size_loads(node, graph)
    if loads > config.inline_max_loads:
        return True, f"read {uses} times, loads {loads} buffers of its size"
    cost = op_cost(node.body, graph.device, node.numel)
    if cost <= config.inline_max_ops:
        return False, f"read {uses} times, cheap to recompute ({cost} ops)"
    return True, f"read {uses} times, costly to recompute ({cost} ops)"


def _full_size_loads(node: ComputeNode, graph: Graph) -> int:
    """Distinct buffers of at least the node's element count that its expression loads."""
    names = {e.arg for e in walk(node.body) if e.op is Op.LOAD}
    return sum(1 for name in names if _numel(graph, name) >= node.numel)


def _numel(graph: Graph, name: str) -> int:
    layout = graph.layout_of(name)
    return layout.numel if layout is not None else graph.producer(name).numel


def _merged_origins(node: ComputeNode, bodies: dict, graph: Graph) -> list:
    """The node's ATen ops plus those of every producer inlined into it."""
    origins = []
    for name in node.reads():
        if name in bodies:
            origins.extend(o for o in graph.producer(name).origins if o not in origins)
    origins.extend(o for o in node.origins if o not in origins)
    return origins


def _substitute_inlined(body: Expr, bodies: dict, graph: Graph) -> Expr:
    if not bodies:
        return body
    memo: dict = {}

    def visit(e: Expr, args: tuple):
        if e.op is not Op.LOAD or e.arg not in bodies:
            return None
        producer = graph.producer(e.arg)
        value = substitute(bodies[e.arg], dict(zip(out_vars(producer.sizes), args)))
        return store_cast(value, producer.dtype)
    return rewrite(body, visit, memo)


def _drop_dead(graph: Graph, decisions: list) -> None:
    """Remove stored nodes no output, mutation or extern call depends on."""
    live: set = {o.buffer for o in graph.outputs if o.buffer is not None}
    for node in graph.nodes:
        if isinstance(node, ExternNode) or (isinstance(node, ComputeNode) and node.mutates):
            live.add(node.name)
    for node in reversed(graph.nodes):
        names = _names(node)
        if names & live:
            live.update(node.reads())
    dropped = {n.name for n in graph.nodes if isinstance(n, ComputeNode) and not (_names(n) & live)}
    if not dropped:
        return
    graph.nodes = [n for n in graph.nodes if n.name not in dropped]
    for k, d in enumerate(decisions):
        if d.node in dropped:
            decisions[k] = Decision(d.node, False, "unused")


def _names(node) -> set:
    if isinstance(node, ExternNode):
        return {node.name} | {o[0] for o in node.outputs if o is not None}
    return {node.name}

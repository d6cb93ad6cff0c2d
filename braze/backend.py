"""The ``torch.compile`` entry point.

Takes: an FX graph from TorchDynamo and its example inputs (and
``options={...}``, which patch ``braze.config`` for this compiled function).
Gives: a callable built through AOTAutograd: braze's decomposition table, the
min-cut rematerialization partitioner, input mutations kept in the graph, and
braze compiling the forward, backward and inference graphs. An inference graph
found in the trace cache (``runtime/trace_cache.py``) skips AOTAutograd.

A graph braze fails on runs eagerly with one warning naming the op, unless
``config.strict`` is set: then ``BrazeError`` names the op, its input shapes and
dtypes. So does a compiled graph whose first run raises (``runtime/guard.py``:
its mutated inputs restored, then eager from that call on). Graphs with
symbolic sizes are compiled once per concrete shape.

``explain(fn, *args)`` (``braze.explain``, ``braze.report``) compiles through this backend
while recording what it built, and gives the ``braze.debug.explain.Report``; ``profile``
(``braze.profile``) adds each kernel's time to it.
"""
from __future__ import annotations

import functools
import logging
import warnings

import torch
import torch.utils._pytree as pytree
from torch._dynamo.backends.common import aot_autograd
from torch._functorch import config as functorch_config
from torch._functorch._aot_autograd.schemas import OutputType
from torch._functorch.aot_autograd import make_boxed_func
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch.utils.checkpoint import CheckpointPolicy

from braze import config, logs
from braze.codegen import target_for
from braze.compiler import CompiledGraph, Scope, compile_graph, load_cached, load_entry
from braze.debug.explain import Report
from braze.errors import BrazeError
from braze.ir.traced import copy_graph
from braze.decompositions import table
from braze.lower import LoweringError, graph_device
from braze.runtime import trace_cache
from braze.runtime.guard import guarded, mutated_inputs

aten = torch.ops.aten
log = logging.getLogger(__name__)
_warned: set = set()
_listeners: list = []  # callables receiving each CompiledGraph or failure (see Recording)


class Recording:
    """``with Recording() as r``: the graphs braze compiles while active (``r.graphs``,
    ``CompiledGraph``s) and those it failed on and ran eagerly (``r.failures``, tuples
    ``("failed", kind, message)``)."""

    def __enter__(self):
        self.graphs, self.failures = [], []
        _listeners.append(self._listen)
        return self

    def _listen(self, item) -> None:
        (self.failures if isinstance(item, tuple) else self.graphs).append(item)

    def __exit__(self, *exc) -> None:
        _listeners.remove(self._listen)


def braze_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None):
    options = dict(options or {})
    scope = Scope(_compile_id())
    with config.patch(**options):  # reject unknown knobs now, not at first backward
        trace_key = trace_cache.key_of(gm, example_inputs)
        hit = _from_trace_cache(trace_key, gm, scope, example_inputs, options)
        if hit is not None:
            return hit
        decompositions = table(config.fallback_random)
    cuda = next((x.device for x in example_inputs if isinstance(x, torch.Tensor) and x.is_cuda), None)
    if cuda is not None:
        _start_compile_workers(cuda)
    saved = _SavedLayouts()  # the forward tells the backward whether it chose other strides
    eager = _eager_outputs(gm)
    compilers = {kind: functools.partial(_compile_boxed, kind, options, saved, scope, eager=eager)
                 for kind in ("forward", "backward")}
    compilers["inference"] = functools.partial(_compile_boxed, "inference", options, saved, scope,
                                               remember=(trace_key, len(example_inputs)), eager=eager)
    return aot_autograd(
        fw_compiler=compilers["forward"], bw_compiler=compilers["backward"],
        inference_compiler=compilers["inference"], decompositions=decompositions,
        partition_fn=_partition, keep_inference_input_mutations=True,
    )(gm, example_inputs)


def _partition(joint_module: torch.fx.GraphModule, joint_inputs, *args, **kwargs):
    """PyTorch's min-cut partitioner, after marking the values the backward compares for
    equality to be saved (``_save_compared_values``)."""
    _save_compared_values(joint_module.graph, kwargs.get("num_fwd_outputs"))
    return min_cut_rematerialization_partition(joint_module, joint_inputs, *args, **kwargs)


_EQUALITY = (aten.eq.Tensor, aten.eq.Scalar, aten.ne.Tensor, aten.ne.Scalar)


def _save_compared_values(graph: torch.fx.Graph, forward_outputs: int | None) -> None:
    """A backward that compares a forward value for equality (``amax``'s and ``amin``'s:
    ``input == result``, each maximum's share of the gradient) must read the bits the
    forward computed: recomputed in another kernel, the input need not round the same way
    (a vectorized ``sin`` beside a scalar one, a contraction into a fused multiply-add),
    matches nothing, and the gradient is 0 / 0. Such values are saved (``MUST_SAVE``),
    not recomputed by the partitioner."""
    outputs = graph.find_nodes(op="output")
    if forward_outputs is None or not outputs:
        return
    forward = set()
    stack = [n for n in list(outputs[0].args[0])[:forward_outputs] if isinstance(n, torch.fx.Node)]
    while stack:
        node = stack.pop()
        if node not in forward:
            forward.add(node)
            stack.extend(node.all_input_nodes)
    for node in graph.nodes:
        if node.op != "call_function" or node.target not in _EQUALITY or node in forward:
            continue
        for arg in node.all_input_nodes:
            while arg.op == "call_function" and isinstance(arg.target, torch._ops.OpOverload) and arg.target.is_view:
                arg = arg.args[0]
            val = arg.meta.get("val")
            if arg in forward and arg.op == "call_function" and isinstance(val, torch.Tensor) \
                    and val.dtype.is_floating_point:
                arg.meta["recompute"] = CheckpointPolicy.MUST_SAVE


def _compile_id() -> str:
    """Dynamo's id of the frame compile under way ("0/1"), "" outside Dynamo."""
    compile_id = torch._guards.CompileContext.current_compile_id()
    return str(compile_id) if compile_id is not None else ""


def _from_trace_cache(key: str, gm: torch.fx.GraphModule, scope: Scope, example_inputs, options: dict):
    """Dynamo's callable for a graph found in the trace cache (AOTAutograd not run), or None.
    Its IR is rebuilt, by tracing Dynamo's graph again, only if someone reads it."""
    entry = trace_cache.lookup(key)
    compiled = load_cached(entry.graph_key, "inference", entry.constants, scope) if entry is not None else None
    if compiled is None:
        return None
    from braze.debug.retrace import Retrace
    compiled.rebuild = Retrace(gm, example_inputs, options, {
        "eager_outputs": _eager_outputs, "eager_strides": _eager_strides, "partition": _partition})
    for listener in list(_listeners):
        listener(compiled)
    _debug(compiled)
    call = guarded(compiled, gm, "inference", _report)  # a failing first run falls back to Dynamo's graph
    if entry.disable_autocast:  # as AOTAutograd runs it: the graph holds its casts
        def forward(*args):
            with torch._C._DisableAutocast():
                return call(list(args))
    else:
        def forward(*args):
            return call(list(args))
    forward.compiled = compiled
    return forward


def _start_compile_workers(device: torch.device) -> None:
    """Triton's compile workers import Triton and warm up, and braze's kernel launcher is
    built or loaded, while AOTAutograd traces."""
    from braze.codegen.triton import native, pool
    major, minor = torch.cuda.get_device_capability(device)
    pool.start(major * 10 + minor)
    native.start()


class _SavedLayouts:
    """Whether a forward graph stored a tensor saved for its backward in a layout other than
    the one AOTAutograd traced (channels-last convolutions): its backward is then compiled at
    its first call, for the strides its arguments really have."""
    restrided = False


def _compile_boxed(kind: str, options: dict, saved: _SavedLayouts, scope: Scope, gm: torch.fx.GraphModule,
                   example_inputs, remember: tuple = ("", 0), eager: list | None = None):
    with config.patch(**options):
        if kind == "backward" and saved.restrided:
            return _FirstCall(gm, kind, options, scope)
        if _has_symbolic_sizes(gm):
            try:
                call = _symbolic(gm, kind, options, eager, scope)
            except Exception as exc:  # (setting up the variants, before any compile): run eagerly
                return _fail(gm, kind, exc)
            return _per_shape_cudagraphs(call, gm, kind)
        _eager_strides(gm, kind, eager)
        call = compile_or_fallback(gm, kind, _visible_outputs() if kind == "forward" else None, scope=scope)
        compiled = getattr(call, "compiled", None)
        saved.restrided = getattr(compiled, "restrided", False)
        if compiled is not None and remember[0]:
            trace_cache.remember(remember[0], compiled, gm, remember[1])
        return _with_cudagraphs(call, _static_inputs(gm, kind))


def _eager_strides(gm: torch.fx.GraphModule, kind: str, eager: list | None) -> None:
    if kind != "backward":
        try:
            _keep_eager_strides(gm, eager)
        except Exception as exc:  # (AOTAutograd's metadata differs across torch versions)
            warnings.warn(f"braze: outputs keep the traced strides, not eager's: {type(exc).__name__}: {exc}",
                          stacklevel=3)


def _symbolic(gm: torch.fx.GraphModule, kind: str, options: dict, eager: list | None, scope: Scope):
    """A graph with symbolic sizes: compiled once per size class where the target takes
    sizes as arguments (``runtime/symbolic.py``), else once per concrete shape (from a copy
    of the graph as traced: the per-shape compiles propagate concrete sizes through it)."""
    traced = copy_graph(gm)

    def per_shape(reason: str = ""):
        if _has_unbacked_sizes(traced):  # (a fixed shape would not fix the sizes its ops decide)
            from braze.runtime.symbolic import describe_unbacked
            return _fail(traced, kind, BrazeError(f"sizes its ops decide from values ({describe_unbacked(traced)}) "
                                                  f"compile only symbolically: {reason}"))
        if not config.specialize_dynamic:
            return _fail(traced, kind, BrazeError("symbolic sizes (set specialize_dynamic)"))
        from braze.runtime.specialize import Specializing
        return Specializing(traced, kind, options, functools.partial(compile_or_fallback, scope=scope))

    if config.symbolic_sizes and target_for(graph_device(gm)).takes_sizes:
        from braze.runtime.symbolic import Symbolic
        _eager_strides(gm, kind, eager)
        return Symbolic(gm, kind, options, functools.partial(_compiled_or_raise, scope=scope), per_shape,
                        load_fn=functools.partial(_loaded, scope=scope))
    return per_shape("symbolic sizes are off (symbolic_sizes)" if not config.symbolic_sizes
                     else "this target takes no sizes as arguments")


def _compiled_or_raise(gm: torch.fx.GraphModule, kind: str, scope: Scope | None = None):
    """braze's compiled graph (boxed, its first call guarded); a failure raises."""
    return _announced(compile_graph(gm, kind, scope=scope), gm, kind)


def _loaded(entry, gm: torch.fx.GraphModule, kind: str, scope: Scope | None = None):
    """A variant found in the disk cache (``runtime/variant_cache.py``), boxed as a compiled one."""
    return _announced(load_entry(entry, gm, kind, scope), gm, kind)


def _announced(compiled: CompiledGraph, gm: torch.fx.GraphModule, kind: str):
    """A compiled graph told to the listeners and the debug output, boxed with its first
    call guarded."""
    for listener in list(_listeners):
        listener(compiled)
    _debug(compiled)
    return guarded(compiled, gm, kind, _report)


def _with_cudagraphs(call, static_inputs: list):
    if config.cudagraphs and hasattr(call, "compiled"):
        from braze.runtime import cudagraphs
        return cudagraphs.wrap(call, call.compiled, static_inputs)
    return call


def _per_shape_cudagraphs(call, gm: torch.fx.GraphModule, kind: str):
    """A graph with symbolic sizes replayed through CUDA graphs, one set of captures per
    concrete shape (``runtime/cudagraphs.PerShape``), when asked for and on a GPU. Not one
    with sizes its ops decide from values: the same arguments may give other sizes, and
    reading them waits for the GPU, which a capture cannot."""
    if not config.cudagraphs or graph_device(gm).type != "cuda" or _has_unbacked_sizes(gm):
        return call
    from braze.runtime import cudagraphs
    return cudagraphs.per_shape(call, f"a {kind} graph with symbolic sizes", _static_inputs(gm, kind),
                                mutated_inputs(gm))


class _FirstCall:
    """A graph compiled when it is first called, for its arguments' real strides."""

    def __init__(self, gm: torch.fx.GraphModule, kind: str, options: dict, scope: Scope):
        self.gm, self.kind, self.options, self.scope = gm, kind, options, scope
        self.static_inputs = _static_inputs(gm, kind)
        self.call = None
        self._boxed_call = True

    def __call__(self, args):
        if self.call is None:
            with config.patch(**self.options):
                self.call = _with_cudagraphs(compile_or_fallback(self.gm, self.kind, args=args, scope=self.scope), self.static_inputs)
        return self.call(args)


def _visible_outputs() -> int | None:
    """How many of a forward graph's leading outputs reach the user (the rest are saved
    for the backward), from AOTAutograd's metadata; None when unknown."""
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None) if context is not None else None
    return getattr(metadata, "num_forward_returns", None)


def _eager_outputs(gm: torch.fx.GraphModule) -> list | None:
    """Dynamo's fake values of its graph's outputs, flattened: the strides eager gives them.
    (An in-place op keeps its tensor's strides there; in AOTAutograd's functional graph
    it becomes an out-of-place op with that op's own strides.) None when unknown."""
    outputs = gm.graph.find_nodes(op="output")
    if not outputs:
        return None
    leaves = torch.utils._pytree.tree_leaves(outputs[0].args[0])
    return [n.meta.get("example_value") if isinstance(n, torch.fx.Node) else None for n in leaves]


def _keep_eager_strides(gm: torch.fx.GraphModule, eager: list | None) -> None:
    """Give the user's outputs of a forward or inference graph eager's strides where the
    functional graph traced others (``x = y * 2; x.cumsum_(1); return x``: eager keeps
    ``y``'s strides, the graph's ``cumsum`` is contiguous): ``output.meta["braze_eager"]``,
    one fake value or None per output, read by ``lower/layouts.choose_layouts``. Outputs
    AOTAutograd returns as the graph gives them, and the bases of those it makes views of
    (views replayed by their view functions, which hold for any strides; a view made by
    ``as_strided`` from the traced strides would read the wrong elements, so no base of
    such a view is changed)."""
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None) if context is not None else None
    if not eager or metadata is None or getattr(metadata, "tokens", None):
        return
    info = list(getattr(metadata, "output_info", None) or [])
    if len(info) != len(eager):
        return
    output = gm.graph.find_nodes(op="output")[0]
    results = list(output.args[0]) if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
    first = metadata.num_mutated_inp_runtime_indices  # updated inputs, the user's outputs, intermediate bases
    candidates, fixed = {}, set()
    for k, (out, value) in enumerate(zip(info, eager)):
        kind = out.output_type
        if kind in (OutputType.non_alias, OutputType.unsafe_view_alias):
            candidates[first + k] = value
            continue
        if kind is OutputType.alias_of_intermediate_base_is_user_output:
            base = first + out.base_idx
        elif kind in (OutputType.alias_of_intermediate, OutputType.alias_of_intermediate_save_as_output):
            base = first + len(info) + out.base_idx
            if isinstance(value, torch.Tensor) and value._base is not None:
                candidates.setdefault(base, value._base)
        else:
            continue
        if not _replayed(out):
            fixed.add(base)
    wanted = [None] * len(results)
    for j, value in candidates.items():
        traced = results[j].meta.get("val") if j < len(results) and isinstance(results[j], torch.fx.Node) else None
        if j in fixed or not (_concrete(value) and _concrete(traced)):
            continue
        if tuple(value.shape) == tuple(traced.shape) and _strides_of(value) != _strides_of(traced):
            wanted[j] = value
    if any(w is not None for w in wanted):
        output.meta["braze_eager"] = wanted


def _replayed(out) -> bool:
    """Does AOTAutograd make this aliasing output by replaying its view functions?"""
    views = getattr(out, "view_meta_sequence", None)  # (absent where a torch has no view replay)
    return (getattr(functorch_config, "view_replay_for_aliased_outputs", False) and views is not None
            and not any(getattr(v, "has_symbolic_inputs", True) for v in views.sequence))


def _concrete(value) -> bool:
    return isinstance(value, torch.Tensor) and all(isinstance(s, int) for s in (*value.shape, *value.stride()))


def _strides_of(t: torch.Tensor) -> tuple:
    """Strides along the dims of more than one element (the others do not matter)."""
    return tuple(st for size, st in zip(t.shape, t.stride()) if size > 1)


def _static_inputs(gm: torch.fx.GraphModule, kind: str) -> list:
    """Indices of inputs expected to keep their address: in a forward or inference graph
    those AOTAutograd knows (parameters, buffers); in a backward graph all but the
    tangents (the values saved by the forward: parameters, and outputs of the forward,
    which keep their address when it is replayed through CUDA graphs). The CUDA graphs
    wrapper checks their addresses at each call and copies those that keep moving."""
    if kind == "backward":
        return [k for k, n in enumerate(gm.graph.find_nodes(op="placeholder"))
                if not n.name.startswith("tangents")]
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None) if context is not None else None
    return list(getattr(metadata, "static_input_indices", None) or [])


def compile_or_fallback(gm: torch.fx.GraphModule, kind: str, visible: int | None = None, args=None,
                        scope: Scope | None = None):
    """braze's compiled graph (boxed), or the graph itself run eagerly after a warning."""
    try:
        compiled = compile_graph(gm, kind, visible, args, scope)
    except Exception as exc:  # never crash the user's program, unless strict
        return _fail(gm, kind, exc)
    return _announced(compiled, gm, kind)


def _fail(gm, kind: str, exc: Exception):
    message = _describe_failure(exc)
    if config.strict:
        if isinstance(exc, BrazeError):
            raise exc
        raise BrazeError(message) from exc
    _report(kind, message)
    return make_boxed_func(gm.forward)


def _report(kind: str, message: str) -> None:
    """A graph runs eagerly: warn once per message, log it each time, and tell the listeners."""
    text = f"braze: running {'an' if kind[:1] in 'aeiou' else 'a'} {kind} graph eagerly: {message}"
    log.info("%s", text)
    if message not in _warned:
        _warned.add(message)
        warnings.warn(text, stacklevel=3)
    for listener in list(_listeners):
        listener(("failed", kind, message))


def _describe_failure(exc: Exception) -> str:
    if isinstance(exc, LoweringError):
        return f"{exc.op} with inputs {exc.inputs}: {exc.detail}"
    return f"{type(exc).__name__}: {exc}"


def _has_unbacked_sizes(gm) -> bool:
    """Does an op of the graph decide a size from its input's values (``nonzero``, ``x[mask]``,
    traced with ``capture_dynamic_output_shape_ops``)?"""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    return any(free_unbacked_symbols(node.meta.get("val")) for node in gm.graph.nodes
               if node.meta.get("val") is not None)


def _has_symbolic_sizes(gm) -> bool:
    if _has_unbacked_sizes(gm):
        return True
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.SymInt):
            return True
        if isinstance(val, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in
                                                 list(val.shape) + list(val.stride())):
            return True
    return False


def _debug(compiled: CompiledGraph) -> None:
    if config.report:
        from braze.debug.html import add_to_page
        add_to_page(compiled, config.report)
    if not (config.debug or config.debug_dir or logs.enabled()):
        return
    from braze.debug.dump import dump
    dump(compiled)


def explain(fn, *args, **kwargs) -> Report:
    """``braze.explain`` (also ``braze.report``): compile ``fn`` for ``args`` and report what
    braze did (``braze.debug.explain.Report``; ``.save(path)`` writes it as an HTML page). If an
    output requires grad, a backward pass runs too (with ``torch.autograd.grad``, so no
    ``.grad`` of the caller's tensors changes), to compile and report the backward graph.
    Graph breaks and recompile limits that Dynamo met on the way are in ``report.dynamo``."""
    return explained(fn, args, kwargs)[0]


def profile(fn, *args, **kwargs) -> Report:
    """``braze.profile``: ``braze.explain``'s report with each kernel's time (``report.profile``,
    ``braze.debug.profile.Profile``: CUDA events on a GPU, wall time on the CPU) from running
    the compiled function (and its backward) again; prints the table."""
    from braze.debug.profile import measure
    with config.patch(cudagraphs=False):  # the kernels are timed one by one, not replayed
        report, again = explained(fn, args, kwargs)
        report.profile = measure(report.graphs, again)
    print(report.profile.table())
    return report


def explained(fn, args: tuple, kwargs: dict) -> tuple:
    """(the report of compiling ``fn`` for ``args``, ``again``: a callable running the
    compiled function once more, and its backward where ``explain`` ran one)."""
    from braze.debug.dynamo_notes import DynamoNotes
    report = Report()

    with Recording() as recording, DynamoNotes() as notes:
        def backend(gm, example_inputs):  # a fresh backend: Dynamo compiles anew for it
            notes.saw(gm)
            return braze_backend(gm, example_inputs)

        compiled = torch.compile(fn, backend=backend)
        _backward(compiled(*args, **kwargs), fn, args, kwargs)
    report.graphs += recording.graphs
    report.failures += [f[1:] for f in recording.failures]
    report.dynamo += notes.lines

    def again():
        _backward(compiled(*args, **kwargs), fn, args, kwargs)
    return report, again


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

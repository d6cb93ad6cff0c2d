"""Running an op's samples eagerly, through braze, and through braze's pipeline
without braze.

Takes: an OpInfo op and a list of its samples. Gives: ``Run`` records: the
outputs and gradients of each sample, the exception if one escaped, and for
braze the graphs it compiled, the ATen ops it passed through, and the graphs it
failed on (and ran eagerly).

Braze runs one sample of every signature group in one compiled function (one
Dynamo frame, one graph, one C++ build), and calls it again for the other members
of the groups, which is what keeps the sweep fast; ``search`` bisects the groups
to attribute a problem. ``torch_only`` is braze's
AOTAutograd wiring (its decompositions, partitioner, mutation handling) with
the graphs run by ATen: when it fails or disagrees too, the cause is upstream of
braze's lowering.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch._functorch.partitioners import min_cut_rematerialization_partition

import braze
from braze import backend as braze_backend
from conformance.samples import copy_sample, cotangents, grad_inputs, grad_outputs


@dataclass
class Run:
    outputs: list = field(default_factory=list)   # per sample
    grads: list = field(default_factory=list)     # per sample: tuple or None
    error: str = ""                               # an exception that escaped
    error_round: int = 0                          # in which call (member of each group)
    graphs: int = 0
    fallbacks: list = field(default_factory=list)
    failures: list = field(default_factory=list)


def seed_of(index: int) -> int:
    return 1000 + index


def call_sample(op, struct):
    inp, args, kwargs = struct
    return op(inp, *args, **kwargs)


def eager(op, sample, index: int, grad: bool, dtype=None, seed=None):
    """(output, grads) of one sample run by PyTorch (on ``dtype`` copies if given)."""
    struct = copy_sample(sample, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(seed_of(index) if seed is None else seed)
        out = call_sample(op, struct)
        grads = _grads(sample, out, struct, index) if grad else None
    return out, grads


def _grads(sample, out, struct, index: int):
    outs = grad_outputs(sample.output_process_fn_grad(out))
    inputs = grad_inputs(struct)
    if not outs or not inputs:
        return None
    return torch.autograd.grad(outs, inputs, cotangents(outs, seed_of(index)), allow_unused=True)


def batched(op):
    """A function computing the op on every sample of a list."""
    def run_all(structs):
        return [op(inp, *args, **kwargs) for inp, args, kwargs in structs]
    return run_all


@dataclass
class Group:
    """Samples of one case that share a signature (one compiled graph serves them all)."""
    case: object          # runner.Case: its samples, dtype and whether gradients are wanted
    members: list         # sample indices


def compiled_run(op, groups, backend) -> Run:
    """Run the samples of ``groups`` through ``torch.compile`` with ``backend``: one
    function computes one member of every group; it is called once per member of
    the largest group (later calls reuse the compiled graph, same shapes). Gives
    ``run.outputs[g][m]`` and ``run.grads[g][m]`` for member ``m`` of group ``g``."""
    run = Run()
    run.outputs = [[None] * len(g.members) for g in groups]
    run.grads = [[None] * len(g.members) for g in groups]
    torch._dynamo.reset()
    fn = torch.compile(batched(op), backend=backend, dynamic=False)
    with braze_backend.Recording() as heard, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in range(max(len(g.members) for g in groups)):
            try:
                _one_round(fn, groups, r, run)
            except Exception as exc:  # noqa: BLE001 - recorded, this is what the sweep measures
                run.error = f"{type(exc).__name__}: {_first_line(exc)}"
                run.error_round = r
                break
    run.graphs = len(heard.graphs)
    run.fallbacks = sorted({f for g in heard.graphs for f in g.fallbacks})
    run.failures = [f"{item[-2]} graph: {item[-1]}" for item in heard.failures]
    return run


def _one_round(fn, groups, r, run) -> None:
    picked = [g.members[min(r, len(g.members) - 1)] for g in groups]
    samples = [g.case.samples[i] for g, i in zip(groups, picked)]
    structs = [copy_sample(s) for s in samples]
    torch.manual_seed(seed_of(picked[0]))
    outputs = fn(structs)
    wanted = [g.case.grad and r < len(g.members) for g in groups]
    grads = _batched_grads(samples, outputs, structs, picked, wanted)
    for k, g in enumerate(groups):
        if r < len(g.members):
            run.outputs[k][r], run.grads[k][r] = outputs[k], grads[k]


def _batched_grads(samples, outputs, structs, indices, wanted) -> list:
    """Per-sample gradients from one backward pass over every sample's outputs."""
    all_outs, all_cots, all_inputs, spans = [], [], [], []
    for sample, out, struct, index, want in zip(samples, outputs, structs, indices, wanted):
        outs = grad_outputs(sample.output_process_fn_grad(out)) if want else []
        inputs = grad_inputs(struct)
        if not outs or not inputs:
            spans.append(None)
            continue
        spans.append((len(all_inputs), len(inputs)))
        all_outs += outs
        all_cots += cotangents(outs, seed_of(index))
        all_inputs += inputs
    if not all_outs:
        return [None] * len(samples)
    flat = torch.autograd.grad(all_outs, all_inputs, all_cots, allow_unused=True)
    return [None if span is None else tuple(flat[span[0]:span[0] + span[1]]) for span in spans]


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def braze_fn(cpu_backend: str):
    """The braze backend, non-strict, with ``cpu_backend`` for CPU tensors."""
    def backend(gm, example_inputs):
        return braze_backend.braze_backend(gm, example_inputs, options={"cpu_backend": cpu_backend,
                                                                         "strict": False})
    return backend


def _run_eagerly(gm, example_inputs):
    return make_boxed_func(gm.forward)


def torch_only(gm, example_inputs):
    """braze's AOTAutograd wiring with every graph run by ATen (no braze)."""
    from braze.decompositions import table
    return aot_autograd(fw_compiler=_run_eagerly, bw_compiler=_run_eagerly, inference_compiler=_run_eagerly,
                        decompositions=table(), partition_fn=min_cut_rematerialization_partition,
                        keep_inference_input_mutations=True)(gm, example_inputs)


def ensure_backend(name: str) -> None:
    """Raise if braze's code generator ``name`` is not there (yet)."""
    if name == "triton":
        from braze.codegen import triton as triton_codegen
        if not hasattr(triton_codegen, "TritonBackend"):
            raise RuntimeError("braze has no Triton backend yet (braze.codegen.triton.TritonBackend)")
    elif name == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("the cuda sweep needs a GPU")
    elif name != "cpp":
        raise ValueError(f"unknown backend {name!r}")
    assert braze.config is not None

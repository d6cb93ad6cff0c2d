"""Launchers: the Python function the wrapper calls for each kernel.

Takes: a kernel plan's buffers, the names of its compiled kernel(s), their
constexprs, warps and grids (all fixed at compile time). Gives: the text of
one small function per plan, ``kernelN(buf0, buf3, ...)``, and
``make_launchers``, which executes that text with the objects it names.

On a GPU the launcher calls the compiled binary directly (no argument binding,
no specialization, no cache lookups): one alignment check, the current
stream, one launch through braze's one C launcher (``native.py``) where it can
run the kernel, else through Triton's C launcher for the kernel: a fraction of
the host time of Triton's ``fn[grid](...)`` (``python -m
benchmarks.launch_overhead``). A tensor whose data pointer is not 16-byte
aligned (a view with an odd offset) takes Triton's own launch path, which
specializes for it; so does a symbolic size that the kernel was compiled to take as
a multiple of 16 (its value in the call compiled was one: loads along a row of that
length vectorize) when a call's is not, and a call whose row is full where the compiled
call's was not, or the reverse (``Launch.run_time``: ``ROWFULL``, a constexpr the launcher
computes from the sizes).
Under the interpreter the launcher calls the kernel through ``fn[grid](...)``.
A split reduction launches two kernels through workspaces (the partial results)
that live as long as the compiled graph: the partials are dead when the launcher
returns, so each (stream, workspace parameter, dtype, size) gets one tensor on the first call instead
of an allocation per call (ResNet-50's training step runs about 150 splits).
Calls on one stream run in order; another stream gets its own workspace.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from braze.codegen.triton import native
from braze.codegen.triton.worker import DIVISIBLE


@dataclass
class Launch:
    """One kernel launch inside a launcher."""
    fn: str  # the kernel function's name
    args: list  # argument names, buffers first
    constexprs: dict
    num_warps: int
    grid: tuple
    compiled: object = None  # Triton CompiledKernel (GPU), else None
    alias: str = ""  # the name its objects get in the launchers' namespace (default: fn)
    module_key: str = ""  # the cache key of the module defining ``fn``
    signature: dict = field(default_factory=dict)  # Triton's signature (pointer types, constexprs)
    debug: bool = False  # the kernel asserts on the device (run-time checks): compiled with them
    run_time: dict = field(default_factory=dict)  # constexpr -> Python text of its value at a call

    @property
    def ref(self) -> str:
        return self.alias or self.fn


@dataclass
class LauncherSpec:
    name: str  # the plan's name: the function the wrapper calls
    buffers: list  # wrapper buffer names, in kernel parameter order
    launches: list  # Launch, in order
    workspaces: list = field(default_factory=list)  # (name, torch dtype, numel)
    comment: str = ""
    sizes: list = field(default_factory=list)  # symbolic sizes, after the buffers (``ir/symbols.py``)


def launcher_text(spec: LauncherSpec, gpu: bool) -> str:
    lines = [f"def {spec.name}({', '.join(spec.buffers + spec.sizes)}):"]
    if spec.comment:
        lines.append(f'    """{spec.comment}"""')
    if spec.workspaces:
        lines.append(f"    stream = {'_stream(_device_index)' if gpu else '0'}")
    for name, dtype, numel in spec.workspaces:
        key = f"(stream, {name!r}, {dtype}, {numel})"
        lines += [f"    {name} = _workspaces.get({key})",
                  f"    if {name} is None:",
                  f"        {name} = _workspace({key})"]
    if gpu:
        check = " | ".join([f"{b}.data_ptr()" for b in spec.buffers] + _divisible_sizes(spec)) or "0"
        other = "".join(f" or {text} != {launch.constexprs[name]}" for launch in spec.launches
                        for name, text in launch.run_time.items())
        lines.append(f"    if ({check}) % 16{other}:  # not as compiled (an unaligned view, a size not a multiple "
                     "of 16, a row full or not): Triton's own launch specializes for it")
        aligned = f"({check}) % 16 == 0" if other else False  # (a full row alone took this path)
        lines += ["    " + _jit_call(launch, indent="    ", checked=aligned) for launch in spec.launches]
        lines.append("        return")
        lines += ["    " + _direct_call(launch, k) for k, launch in enumerate(spec.launches)]
    else:
        lines += ["    " + _jit_call(launch) for launch in spec.launches]
    return "\n".join(lines)


def _divisible_sizes(spec: LauncherSpec) -> list:
    """The sizes some kernel of ``spec`` was compiled for as multiples of 16."""
    return [s for s in spec.sizes if any(launch.signature.get(s, "").endswith(DIVISIBLE) for launch in spec.launches)]


def _jit_call(launch: Launch, indent: str = "", checked=True) -> str:
    """Triton's own launch. ``checked`` False (or the text of a test at the call): the
    launcher's alignment check failed, so the kernel may not assume its sizes are multiples
    of 16 (``ALIGNED=False``). A constexpr decided at each call (``Launch.run_time``) gets
    its value from the call's sizes."""
    def value(k, v):
        return checked if k == "ALIGNED" else launch.run_time.get(k, v)
    consts = "".join(f", {k}={value(k, v)}" for k, v in launch.constexprs.items())
    return f"{indent}{launch.ref}[{launch.grid}]({', '.join(launch.args)}{consts}, num_warps={launch.num_warps})"


def _direct_call(launch: Launch, k: int) -> str:
    g = launch.grid
    own = getattr(launch.compiled, "braze_launch", None)
    if own is not None:  # braze's own launcher (native.py): pointers only, no constexprs
        threads, shared, extra = own
        return (f"_launch({launch.ref}_function, {g[0]}, {g[1]}, {g[2]}, {threads}, {shared}, "
                f"_stream(_device_index), _device_index, {extra}, {', '.join(launch.args)})")
    args = ", ".join(launch.args + [str(v) for v in launch.constexprs.values()])
    flags = _launch_flags(launch.compiled)[1]
    extra = "".join(f"{flag}, " for flag in flags)
    return (f"{launch.ref}_run({g[0]}, {g[1]}, {g[2]}, _stream(_device_index), {launch.ref}_function, {extra}"
            f"{launch.ref}_metadata, None, None, None, {args})")


def _launch_flags(compiled) -> tuple:
    """(the callable to launch with, its arguments between the function and the metadata).
    Triton's launcher object allocates scratch memory when a kernel needs some, then
    calls its C ``launch``; a kernel that needs none goes to ``launch`` directly."""
    runner = compiled.run
    direct = getattr(runner, "launch", None)
    needs_scratch = getattr(runner, "global_scratch_size", 1) or getattr(runner, "profile_scratch_size", 1)
    if direct is None or needs_scratch or not hasattr(runner, "launch_pdl"):
        return runner, []
    return direct, [repr(bool(runner.launch_cooperative_grid)), repr(bool(runner.launch_pdl)), "None", "None"]


def make_launchers(specs: list, modules: dict, device, gpu: bool) -> tuple:
    """(source text of every launcher, {plan name: launcher function})."""
    workspaces: dict = {}  # (stream, parameter, dtype, numel) -> tensor, shared by this graph's launchers

    def workspace(key: tuple) -> torch.Tensor:
        return workspaces.setdefault(key, torch.empty(key[3], dtype=key[2], device=device))
    env = {"torch": torch, "_device": device, "_workspaces": workspaces, "_workspace": workspace}
    if gpu:
        env["_stream"] = torch._C._cuda_getCurrentRawStream
        env["_device_index"] = device.index or 0
    for spec in specs:
        for launch in spec.launches:
            env[launch.ref] = getattr(modules[launch.fn], launch.fn)
            if not gpu:
                continue
            env[f"{launch.ref}_function"] = launch.compiled.function
            if hasattr(launch.compiled, "braze_launch"):
                env["_launch"] = native.launch_function()
            else:
                env[f"{launch.ref}_run"] = _launch_flags(launch.compiled)[0]
                env[f"{launch.ref}_metadata"] = launch.compiled.packed_metadata
    text = "\n\n\n".join(launcher_text(spec, gpu) for spec in specs) + "\n"
    namespace: dict = {}
    exec(compile(text, "<braze triton launchers>", "exec"), env, namespace)
    return text, {spec.name: namespace[spec.name] for spec in specs}

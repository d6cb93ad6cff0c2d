"""The Triton backend: one module per distinct kernel, launched from the wrapper.

Takes: kernel plans of one graph and the device. Gives: ``Built``: a launcher
function per plan (``kernelN(buf, ...)``), the generated source (kernel modules
and launchers), each kernel's shape, and whether everything came from the
cache.

Steps per plan: choose the shape and launch parameters (``shapes``), fold a
looped softmax's sum into its max's loop (``online``), generate
the kernel text under a placeholder name (``kernel``), name it by a hash of
that text (so equal kernels are one module, whatever the plans were called),
write and import the module (``build``), and on a GPU start compiling it at
once. Launchers (``launch``) are built when every compile has finished.
A foreach plan becomes one or more kernels (``foreach.split``), each a unit
of its own, launched one after the other by the plan's one launcher.
CUDA tensors run on the GPU; CPU tensors through ``TRITON_INTERPRET=1``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from braze import config, progress
from braze.codegen import Built
from braze.codegen.triton import autotune, build
from braze.codegen.triton.helpers import HEADER, helper_source
from braze.codegen.triton.foreach import TritonForeach, split
from braze.codegen.triton.kernel import TritonKernel, divisible_sizes, parameters
from braze.codegen.triton.launch import Launch, LauncherSpec, make_launchers
from braze.codegen.triton.online import fold_softmax_sums
from braze.codegen.triton.shapes import INTERPRETER, choose, device_info
from braze.codegen.triton.worker import DIVISIBLE
from braze.ir import symbols
from braze.runtime import cache

PLACEHOLDER = "KERNEL_NAME"


@dataclass
class Unit:
    """One kernel on its way to a launcher."""
    plan: object
    kernel: TritonKernel | TritonForeach
    fn: str  # the kernel function's name
    key: str  # the module's cache key
    text: str
    module: object = None
    shapes: list = field(default_factory=list)  # launch configurations to build (several: autotuning)
    tune_key: str = ""
    launcher: str = ""  # the plan whose launcher runs it: its own, or the foreach plan it is part of

    @property
    def tunable(self) -> bool:
        return self.launcher == self.plan.name and not self.plan.is_foreach


class TritonBackend:
    name = "triton"
    supports_foreach = True

    def __init__(self, device):
        self.device = torch.device(device)

    def compile(self, plans: list) -> Built:
        with symbols.language("python"):  # kernels, grids and launchers print sizes as Python
            return self._compile(plans)

    def _compile(self, plans: list) -> Built:
        if not plans:
            return Built({}, {}, "", recipe=TritonRecipe({}, []))
        gpu = not build.interpreting(self.device)
        if not gpu:
            return self._build(plans, None)
        expected = sum(max(1, len(p.parts)) for p in plans)  # a foreach plan may be several kernels
        with build.Compiler(self.device, expected) as compiler:
            return self._build(plans, compiler)

    def _build(self, plans: list, compiler) -> Built:
        gpu = compiler is not None
        info = device_info(self.device)
        units, hits = [], []
        for unit in (u for plan in plans for u in self._units(plan, info)):
            hits.append(build.is_cached(unit.key))
            unit.module = build.load_module(unit.text, unit.key, interpret=not gpu)
            if not gpu and config.triton_compile_check:
                build.compile_check(unit.text, unit.key, _launches(unit, unit.kernel.shape), _options,
                                    config.triton_compile_check)
            unit.shapes = self._configurations(unit, info) if gpu else [unit.kernel.shape]
            for shape in unit.shapes if gpu else ():
                for launch in _launches(unit, shape):
                    _submit(compiler, unit.module, launch)
            units.append(unit)
            if not gpu:
                progress.built()
        specs = _per_plan([(u, self._spec(u, shape, k)) for u in units for k, shape in enumerate(u.shapes)], plans)
        tuned = [u for u in units if len(u.shapes) > 1]
        recipe = None if tuned else TritonRecipe({u.key: u.text for u in units}, specs)
        launcher_source, objects = _realize(specs, {u.key: u.module for u in units}, self.device, compiler)
        for unit in tuned:
            tried = [objects.pop(_spec_name(unit, k)) for k in range(len(unit.shapes))]
            choices = autotune.candidates(unit.plan, unit.kernel.shape)
            written = [k for k, b in enumerate(unit.kernel.buffers) if b in unit.plan.writes]
            objects[unit.plan.name] = autotune.Tuner(unit.plan.name, tried, choices, unit.tune_key, written)
        launches = {p.name: f"{p.name}({', '.join(list(parameters(p)) + symbols.parameters())})" for p in plans}
        hit = all(hits) and (compiler is None or compiler.was_cached())
        return Built(objects, launches, _source(units, launcher_source), _shapes(units), hit, recipe,
                     _params(units))

    def _units(self, plan, info) -> list:
        """A plan's units: one, or one per kernel of a foreach plan (``foreach.split``)."""
        plans = split(plan, info) if plan.is_foreach else [plan]
        return [self._generate(p, info, plan.name) for p in plans]

    def _generate(self, plan, info, launcher: str) -> Unit:
        if plan.is_foreach:
            kernel = TritonForeach(plan, info)
        else:
            shape = choose(plan, info)
            if shape.name == "row_loop":
                plan = fold_softmax_sums(plan)
            kernel = TritonKernel(plan, shape, interpreted=info is INTERPRETER)
        body = kernel.source(PLACEHOLDER)
        canonical = HEADER + helper_source(kernel.helpers) + "\n\n" + body + "\n"
        fn = f"triton_{kernel.shape.name}_{cache.key_of(canonical)[:12]}"
        text = canonical.replace(f"def {PLACEHOLDER}", f"def {fn}")
        return Unit(plan, kernel, fn, build.module_key(text), text, launcher=launcher)

    def _configurations(self, unit: Unit, info) -> list:
        """The launch configurations to compile: the closed form, a recorded autotuning
        choice, or (``config.autotune``, nothing recorded) every candidate."""
        shape = unit.kernel.shape
        if not config.autotune or not unit.tunable:
            return [shape]
        unit.tune_key = autotune.record_key(unit.key, info.name)
        choice = autotune.recorded(unit.tune_key)
        if choice is not None:
            unit.kernel.shape = autotune.apply(unit.plan, shape, choice)
            return [unit.kernel.shape]
        return [autotune.apply(unit.plan, shape, c) for c in autotune.candidates(unit.plan, shape)]

    def _spec(self, unit: Unit, shape, k: int) -> LauncherSpec:
        launches = _launches(unit, shape)
        for launch in launches:
            launch.alias = f"{launch.fn}_c{k}" if len(unit.shapes) > 1 else ""
        numel = shape.blocks.get("RSPLIT", 1) * unit.plan.outer_numel()
        workspaces = [(param, dtype, numel) for param, dtype, _ in unit.kernel.workspaces]
        blocks = ", ".join(f"{k}={v}" for k, v in shape.blocks.items())
        what = f"foreach of {len(unit.plan.parts)}" if unit.plan.is_foreach else shape.name
        comment = (f"{unit.plan.name}: {what} ({blocks}; num_warps={shape.num_warps}); "
                   f"ops: {', '.join(unit.plan.origins)}")
        return LauncherSpec(_spec_name(unit, k), list(unit.kernel.buffers), launches, workspaces, comment,
                            symbols.parameters())


@dataclass
class TritonRecipe:
    """What a later process loads instead of generating: the kernel modules' text (by
    cache key) and the launcher specs (launch parameters and signatures, no binaries)."""
    modules: dict
    specs: list

    def __post_init__(self):
        self.specs = [dataclasses.replace(s, launches=[dataclasses.replace(x, compiled=None) for x in s.launches])
                      for s in self.specs]

    def load(self, device) -> dict:
        """The launchers: modules imported, binaries loaded from Triton's cache (compiled on a miss)."""
        if not self.specs:
            return {}
        with symbols.language("python"):  # (a stored variant's grids print its sizes)
            return self._load(device)

    def _load(self, device) -> dict:
        gpu = not build.interpreting(device)
        modules = {key: build.load_module(text, key, interpret=not gpu) for key, text in self.modules.items()}
        specs = [dataclasses.replace(s, launches=[dataclasses.replace(x) for x in s.launches]) for s in self.specs]
        if not gpu:
            return _realize(specs, modules, device, None)[1]
        launches = [x for s in specs for x in s.launches]
        with build.Compiler(device, len(launches)) as compiler:
            for launch in launches:
                _submit(compiler, modules[launch.module_key], launch)
            return _realize(specs, modules, device, compiler)[1]


def _submit(compiler, module, launch: Launch) -> None:
    compiler.submit(module, launch.module_key, launch.fn, launch.signature, launch.constexprs, _options(launch))


def _options(launch: Launch) -> dict:
    """Triton's compile options: the warps, whether libdevice flushes subnormals
    (``config.libdevice_ftz``; Triton flushes by default, eager's CUDA kernels do not), and for
    a kernel with run-time checks its device assertions on (Triton's overflow checks off)."""
    options = {"num_warps": launch.num_warps, "enable_reflect_ftz": config.libdevice_ftz}
    return {**options, "debug": True, "sanitize_overflow": False} if launch.debug else options


def _realize(specs: list, modules: dict, device, compiler) -> tuple:
    """(launcher source, launchers): each launch's binary taken from the compiler (GPU),
    then the launcher functions built. ``modules``: cache key -> module."""
    launches = [x for s in specs for x in s.launches]
    if compiler is not None:  # progress counts the binaries awaited
        progress.total(len(launches))
        progress.stage("Triton compiling")
    for launch in launches:
        if compiler is not None:
            launch.compiled = compiler.result(launch.module_key, launch.fn, launch.signature, launch.constexprs,
                                              _options(launch))
            progress.built()
    by_fn = {x.fn: modules[x.module_key] for s in specs for x in s.launches}
    return make_launchers(specs, by_fn, device, compiler is not None)


def _per_plan(specs: list, plans: list) -> list:
    """The launcher specs: one per plan (an autotuned plan: one per configuration), a
    foreach plan's kernels launched one after the other from one. ``specs``: (unit, spec)."""
    merged = {p.name: LauncherSpec(p.name, list(parameters(p)), [], sizes=symbols.parameters()) for p in plans
              if p.is_foreach}
    out = []
    for unit, spec in specs:
        target = merged.get(unit.launcher)
        if target is None:
            out.append(spec)
            continue
        if not target.launches:
            out.append(target)
        target.launches += spec.launches
        target.comment = "\n    ".join(filter(None, [target.comment, spec.comment]))
    return out


def _shapes(units: list) -> dict:
    """Plan name -> its kernels' shapes (a foreach plan with a transposing part: "foreach+tiled")."""
    found: dict = {}
    for u in units:
        found.setdefault(u.launcher, []).append(u.kernel.shape.name)
    return {name: "+".join(dict.fromkeys(names)) for name, names in found.items()}


def _params(units: list) -> dict:
    """Plan name -> its kernels' blocks, warps and grid, as text (``Built.params``)."""
    found: dict = {}
    for u in units:
        shape = u.kernel.shape
        text = f"{shape.name}: {_launch_text(shape.blocks, shape.num_warps, shape.grid)}"
        if shape.finish:
            finish = shape.finish
            text += f"; then {_launch_text(finish['blocks'], finish['num_warps'], finish['grid'])}"
        found.setdefault(u.launcher, []).append(text)
    return {name: "; ".join(texts) for name, texts in found.items()}


def _launch_text(blocks: dict, num_warps: int, grid) -> str:
    return f"{''.join(f'{k}={v}, ' for k, v in blocks.items())}num_warps={num_warps}, grid {grid}"


def _spec_name(unit: Unit, k: int) -> str:
    return unit.plan.name if len(unit.shapes) == 1 else f"{unit.plan.name}_c{k}"


def _launches(unit: Unit, shape) -> list:
    """The launches of a unit's kernel(s) under one configuration, in order."""
    kernel = unit.kernel
    args = list(kernel.buffers) + [w[0] for w in kernel.workspaces] + symbols.parameters()
    values = {**shape.blocks, "ALIGNED": True}  # (compiled for sizes the launcher checks: ``alignment_lines``)
    values.update({name: value for name, (value, _) in kernel.run_time.items()})
    main = {name: values[name] for name in kernel.constexprs[0]}
    run_time = {name: text for name, (_, text) in kernel.run_time.items() if name in main}
    launches = [Launch(unit.fn, args, main, shape.num_warps, shape.grid, run_time=run_time)]
    if shape.finish:
        finish = {name: {**values, **shape.finish["blocks"]}[name] for name in kernel.constexprs[1]}
        launches.append(Launch(f"{unit.fn}_finish", args, finish, shape.finish["num_warps"],
                               shape.finish["grid"]))
    for launch in launches:
        launch.module_key, launch.signature = unit.key, _signature(unit, launch)
        launch.debug = "tl.device_assert" in unit.text
    return launches


def _signature(unit: Unit, launch: Launch) -> dict:
    kernel = unit.kernel
    dtypes = [unit.plan.dtypes[b] for b in kernel.buffers] + [w[1] for w in kernel.workspaces]
    params = [kernel.params[b] for b in kernel.buffers] + [w[0] for w in kernel.workspaces]
    divisible = divisible_sizes()
    sizes = {name: ("i64" if kernel.shape.wide else "i32") + (DIVISIBLE if name in divisible else "")
             for name in symbols.parameters()}
    return build.signature_of(params, dtypes, launch.constexprs, sizes)


def _source(units: list, launchers: str) -> str:
    seen, parts = set(), []
    for u in units:
        if u.key not in seen:
            seen.add(u.key)
            parts.append(f"# ---- module {u.fn} (cache key {u.key})\n{u.text}")
    return "\n\n".join(parts) + "\n\n# ---- launchers\n" + launchers


__all__ = ["TritonBackend", "config"]

"""The layering of the package, read from its source: ``ir/``, ``lower/`` and ``fuse/`` import
nothing from ``codegen/`` (they ask the ``braze.target.Target``), and no chain of imports
between modules of different folders leads back to where it started."""
import ast
import functools
import pathlib

import braze

ROOT = pathlib.Path(braze.__file__).parent
PASSES = ("braze.ir", "braze.lower", "braze.fuse")


@functools.lru_cache(maxsize=None)
def _all_modules() -> tuple:
    modules = []
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return tuple(modules)


def _imports() -> dict:
    """module -> the braze modules it imports (at any depth of its code, lazily too)."""
    graph = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("braze"):
                names = {f"{node.module}.{a.name}" for a in node.names}
                found.update(names if names & set(_all_modules()) else {node.module})
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("braze"))
        graph[module] = found
    return {m: {i for i in found if i in graph and i != m} for m, found in graph.items()}


def _folder(module: str) -> str:
    """The unit of layering: a folder (``braze.fuse``), or a module at the top
    (``braze.config``, ``braze.compiler``), or the package's ``__init__`` (``braze``)."""
    return ".".join(module.split(".")[:2])


def test_passes_import_nothing_from_the_code_generators():
    offending = {m: sorted(i for i in found if i.startswith("braze.codegen"))
                 for m, found in _imports().items() if m.startswith(PASSES)}
    assert not {m: found for m, found in offending.items() if found}


def test_no_import_cycle_crosses_a_folder():
    imports = _imports()
    folders = {}
    for module, found in imports.items():
        for imported in found:
            if _folder(imported) != _folder(module):
                folders.setdefault(_folder(module), set()).add(_folder(imported))
    cycles = []
    for start in folders:
        stack, seen = [(start, [start])], set()
        while stack:
            folder, path = stack.pop()
            for nxt in folders.get(folder, ()):
                if nxt == start:
                    cycles.append(path + [start])
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    assert not cycles, cycles

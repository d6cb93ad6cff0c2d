"""Generated source as HTML, for the report page: one kernel's code, lightly highlighted.

Takes: a compiled graph's source (a C++ translation unit, or Triton modules and their
launchers) and a kernel's name. Gives: ``kernel_source(source, name)``, the part of the
source that is that kernel (C++: its function and the comment above it; Triton: its
launcher and the modules it launches), and ``highlight(text)``, HTML-escaped text whose
comments, strings, numbers and keywords are wrapped in ``<span class=...>`` (classes
``c``, ``s``, ``n``, ``k``; the page's style colours them). A tokenizer of a few regular
expressions, no dependency: it need not parse, only colour.
"""
from __future__ import annotations

import html
import re

_TOKEN = re.compile(r"""(?P<c>//[^\n]*|\#[^\n]*)
                      |(?P<s>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
                      |(?P<n>\b\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[fFuUlL]*\b)
                      |(?P<w>[A-Za-z_]\w*)""", re.VERBOSE)

KEYWORDS = frozenset("""
    def return if elif else for while in range import from as with not and or is None True False
    lambda pass break continue class yield
    void int float double char bool const static inline struct extern unsigned signed long short
    int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t auto sizeof __restrict
    constexpr template typename
""".split())


def highlight(text: str) -> str:
    out, last = [], 0
    for match in _TOKEN.finditer(text):
        out.append(html.escape(text[last:match.start()]))
        kind, token = match.lastgroup, match.group()
        if kind == "w":
            kind = "k" if token in KEYWORDS else None
        out.append(f'<span class="{kind}">{html.escape(token)}</span>' if kind else html.escape(token))
        last = match.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def kernel_source(source: str, name: str) -> str:
    """The part of ``source`` that is kernel ``name`` ("" when not found)."""
    if any(_cpp_signature(line, name) for line in source.splitlines()):
        return _cpp_function(source, name)
    return _triton_kernel(source, name)


def _cpp_signature(line: str, name: str) -> bool:
    """``extern "C" void name(``, or with a function attribute before ``void``."""
    return line.startswith('extern "C" ') and f" void {name}(" in line


def _cpp_function(source: str, name: str) -> str:
    lines = source.splitlines()
    start = next(k for k, line in enumerate(lines) if _cpp_signature(line, name))
    if start > 0 and lines[start - 1].startswith(f"// {name}:"):
        start -= 1
    end = next((k for k in range(start, len(lines)) if lines[k] == "}"), len(lines) - 1)
    return "\n".join(lines[start:end + 1])


def _triton_kernel(source: str, name: str) -> str:
    """The launcher ``def name(`` and the modules (``# ---- module fn``) whose kernels it launches."""
    launcher = re.search(rf"^def {re.escape(name)}\(.*?(?=^def |^# ---- |\Z)", source, re.S | re.M)
    if launcher is None:
        return ""
    called = set(re.findall(r"\btriton_\w+", launcher.group()))
    modules = [m.group() for m in re.finditer(r"^# ---- module (\w+).*?(?=^# ---- |\Z)", source, re.S | re.M)
               if any(fn == m.group(1) or fn.startswith(m.group(1) + "_") for fn in called)]
    return "\n".join(text.rstrip() + "\n" for text in modules + [launcher.group()])

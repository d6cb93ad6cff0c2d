"""Notes on a compiled graph that its kernel counts alone would hide.

Takes: a ``CompiledGraph`` (or anything with ``fallbacks``). Gives: ``notes(graph)``, lines
for the report and the debug log. Today one kind: a graph that PyTorch's native fast path
turned into one fused ATen op (``nn.TransformerEncoderLayer`` and ``nn.MultiheadAttention``
in eval mode with no gradient), so braze has nothing to fuse and builds no kernel.
"""
from __future__ import annotations

# The fused ATen op of each fast path, and the module that takes it.
FAST_PATHS = {
    "aten._transformer_encoder_layer_fwd.default": "nn.TransformerEncoderLayer",
    "aten._native_multi_head_attention.default": "nn.MultiheadAttention",
}


def notes(graph) -> list:
    """Lines explaining what in ``graph`` braze did not compile on purpose."""
    found = []
    for op in dict.fromkeys(getattr(graph, "fallbacks", ())):
        module = FAST_PATHS.get(op)
        if module is not None:
            found.append(f"{op} is PyTorch's native fast path of {module} (eval mode with no "
                         f"gradient): one fused ATen op, so braze has nothing to fuse here; for braze's "
                         f"kernels call torch.backends.mha.set_fastpath_enabled(False) before compiling, "
                         f"or compile the module in train mode")
    return found

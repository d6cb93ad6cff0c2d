"""Unsplit column sums of one bf16 input compiled by braze on the H100: the [RBLOCK, XBLOCK] block at
2x, 4x and 8x the device's block elements, and at 4x with 64 columns a program, next to Inductor.
python .device/coltile2.py (the rule it chose, "x4 64 cols", is shapes._column's half_width since 2354925)"""
import torch
import probekit
import braze.codegen.triton.shapes as S

original = S._column


def variant(times: int, fill_columns: bool):
    """shapes._column with half-width blocks of ``times`` the device's block elements; columns halved
    to fill the device (as for float32) or kept at device.tile (64 on a GPU)."""
    def column(xnumel, rnumel, device, half_width=False):
        if not half_width:
            return original(xnumel, rnumel, device)
        x = min(device.tile, S.next_pow2(xnumel))
        while fill_columns and x > 16 and S.cdiv(xnumel, x) < device.fill:
            x //= 2
        r = min(S.next_pow2(rnumel), max(1, device.block_elements * times // x))
        return S.Shape("column", {"XBLOCK": x, "RBLOCK": r}, S._warps(x * r), (S.cdiv(xnumel, x), 1, 1),
                       orientation="column")
    return column


rules = {"x2": variant(2, True), "x4": variant(4, True), "x8": variant(8, True),
         "x4 64 cols": variant(4, False), "x8 64 cols": variant(8, False)}
copy_gbs = probekit.copy_gbs()
fn = lambda x: x.sum(0)
for rows, cols, dtype in ((4096, 16384, torch.bfloat16), (2048, 16384, torch.bfloat16), (4096, 32000, torch.bfloat16),
                          (8192, 16384, torch.bfloat16), (16384, 16384, torch.bfloat16), (1024, 65536, torch.bfloat16),
                          (4096, 16384, torch.float16), (4096, 8192, torch.bfloat16)):
    x = torch.randn(rows, cols, device="cuda").to(dtype)
    ref = x.double().sum(0)
    reads = x.numel() * x.element_size()
    line = probekit.compare(fn, (x,), S, "_column", rules, reads, copy_gbs, reference=ref)
    print(f"{rows}x{cols} {str(dtype)[6:]}:\n   " + "\n   ".join(line), flush=True)
    del x

"""Fit and check the polynomial of the Triton helper ``erf_plus_one`` (braze/codegen/triton/helpers.py).

Takes: nothing (``python tools/fit_erf_plus_one.py [--step N]``; numpy and torch).
Gives: the float32 coefficients of p(t) ~ log2(erfc(t)) on [0, 3.92], p(0) = 0, fitted so that
2**p(t) has the smallest largest absolute error (Lawson's iteratively reweighted least squares
on 40001 points), then a sweep over every N-th float32 t in [0, 3.92] evaluated as the helper
does (one float32 fused multiply-add per Horner step, exp2 rounded to float32), against erfc in
float64: the largest absolute error of 1 + erf(+-t), and the same for float32 ``1 + erf(t)``.
"""
import argparse
import math

import numpy as np
import torch

LIMIT = 3.92  # erfc(3.92) = 2.7e-8: beyond it 1 + erf(t) is 2 in float32, and 1 + erf(-t) is taken as 0
DEGREE = 9


def fit(degree: int = DEGREE, points: int = 40001, rounds: int = 400) -> np.ndarray:
    t = np.linspace(0.0, LIMIT, points)
    target = np.array([math.log2(math.erfc(x)) for x in t])
    weight = np.array([math.erfc(x) for x in t]) * math.log(2)  # error of p, as absolute error of 2**p
    basis = np.vander(t, degree + 1, increasing=True)[:, 1:]  # no constant term: p(0) = 0
    lawson = np.full(points, 1.0 / points)
    best = (math.inf, None)
    for _ in range(rounds):
        scale = np.sqrt(lawson) * weight
        coeffs, *_ = np.linalg.lstsq(basis * scale[:, None], target * scale, rcond=None)
        error = np.abs(basis @ coeffs - target) * weight
        best = min(best, (error.max(), coeffs), key=lambda b: b[0])
        lawson = lawson * error / (lawson * error).sum()
    return np.concatenate([[0.0], best[1]]).astype(np.float32)


def erf_plus_one_like_the_helper(t: torch.Tensor, coeffs: np.ndarray) -> torch.Tensor:
    """2**p(t) for float32 t >= 0, each Horner step one rounding to float32."""
    x, p = t.double(), torch.full(t.shape, float(coeffs[-1]), dtype=torch.float64)
    for c in coeffs[-2::-1]:
        p = (p * x + float(c)).float().double()
    return torch.exp2(p).float()


def sweep(coeffs: np.ndarray, step: int) -> dict:
    top = int(np.array([LIMIT], np.float32).view(np.int32)[0])
    worst = {"braze 1+erf(t)": 0.0, "braze 1+erf(-t)": 0.0, "float32 1+erf(t)": 0.0, "float32 1+erf(-t)": 0.0}
    for start in range(0, top + 1, 1 << 24):
        t = torch.arange(start, min(start + (1 << 24), top + 1), step, dtype=torch.int32).view(torch.float32)
        exact = torch.special.erfc(t.double())  # 1 + erf(-t); 1 + erf(t) is 2 - exact
        e = erf_plus_one_like_the_helper(t, coeffs)
        for name, got, true in (("braze 1+erf(t)", 2.0 - e.double(), 2.0 - exact),
                                ("braze 1+erf(-t)", e.double(), exact),
                                ("float32 1+erf(t)", (1.0 + torch.erf(t)).double(), 2.0 - exact),
                                ("float32 1+erf(-t)", (1.0 + torch.erf(-t)).double(), exact)):
            worst[name] = max(worst[name], (got.float().double() - true).abs().max().item())
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=int, default=64, help="check every STEP-th float32 (1: all)")
    coeffs = fit()
    print("coefficients, t^0 first:", ", ".join(repr(float(c)) for c in coeffs))
    for name, error in sweep(coeffs, parser.parse_args().step).items():
        print(f"largest absolute error of {name}: {error:.3g}")


if __name__ == "__main__":
    main()

"""The markdown page of the model conformance run (``docs/models.md``).

Takes: the result dicts of ``conformance.models``. Gives: a page with one table
row per (model, mode), then the ATen ops that ran through ATen (fallbacks), the
graphs braze ran eagerly and the errors, each with its model.
"""
from __future__ import annotations

import platform

import torch

HEADER = ("| model | mode | status | cos output | cos loss | min cos grad | min cos param "
          "| min cos update (info) "
          "| noise | graphs | kernels | externs | fallbacks | compile s | braze s/iter | eager s/iter |")


def _cos(r: dict, key: str) -> str:
    value = r.get("cosines", {}).get(key)
    return "" if value is None else f"{value:.6f}"


def _graphs(r: dict) -> str:
    graphs = r.get("graphs") or {}
    short = {"inference": "inf", "forward": "fwd", "backward": "bwd"}
    order = ["inference", "forward", "backward"]
    return ", ".join(f"{graphs[k]} {short[k]}" for k in order if k in graphs)


def _noise(r: dict) -> str:
    verdicts = r.get("verdicts", {})
    return str(sum(v["noise"] for v in verdicts.values())) if verdicts else ""


def row(r: dict) -> str:
    status = r["status"]
    cells = [r["model"], r["mode"], status if status == "pass" else f"**{status}**",
             _cos(r, "output"), _cos(r, "loss"), _cos(r, "grad"), _cos(r, "params"), _cos(r, "update"),
             _noise(r), _graphs(r), str(r.get("kernels", "")), str(r.get("externs", "")),
             str(sum(r.get("fallbacks", {}).values())) if "fallbacks" in r else "",
             str(r.get("compile_s", "")), str(r.get("braze_s", "")), str(r.get("eager_s", ""))]
    return "| " + " | ".join(cells) + " |"


def details(results: list) -> list:
    lines = []
    for r in results:
        label = f"{r['model']} {r['mode']}"
        if r.get("fallbacks"):
            ops = ", ".join(f"`{op}` ×{n}" for op, n in sorted(r["fallbacks"].items()))
            lines.append(f"- {label}: ATen fallbacks: {ops}")
        for message in r.get("eager_graphs", []):
            lines.append(f"- {label}: **graph ran eagerly**: {message}")
        if r.get("detail"):
            lines.append(f"- {label}: {r['status']}: {r['detail']}")
        for group, verdict in r.get("verdicts", {}).items():
            if verdict["failed"]:
                if verdict.get("informational"):
                    lines.append(f"- {label}: update (not judged): {len(verdict['failed'])} of "
                                 f"{verdict['tensors']} below 0.9999, e.g. {verdict['failed'][0]}")
                    continue
                shown = "; ".join(verdict["failed"][:4]) + (" ..." if len(verdict["failed"]) > 4 else "")
                lines.append(f"- {label}: **{group} differs** ({len(verdict['failed'])} of "
                             f"{verdict['tensors']}): {shown}")
    return lines


def write_markdown(results: list, path: str, command: str) -> None:
    versions = sorted({r.get("torch", "") for r in results if r.get("torch")})
    lines = [
        "# Real models through braze", "",
        "Models built from configs with random weights (nothing downloaded), run through",
        "`torch.compile(backend=\"braze\")` and eagerly on the same inputs. Inference: eval mode,",
        "`no_grad`. Training: one step (forward, loss, `backward()`, AdamW lr 1e-3), dropout 0.",
        "Cosine similarities in float64 between braze and eager, float32 models; a case",
        "passes when every output, loss, gradient, parameter after the step and buffer has",
        "cosine at least 0.9999 to eager, and no graph ran eagerly. *min cos* columns are the",
        "smallest over all parameters. *min cos update (info)*: the parameter change made by",
        "the step, reported but not judged: AdamW's first step is about lr·sign(g), so rounding",
        "noise in tiny gradient elements becomes a full-size difference (eager float32 differs",
        "from float64 as much). *noise*: tensors that eager float32 itself gets wrong (cosine",
        "to a float64 eager run below 0.9999, e.g. gradients that are zero in exact arithmetic",
        "such as attention key biases); cosine says nothing there, so braze passes such a",
        "tensor when its distance to the float64 run is at most twice eager's, and it is left",
        "out of the min. *compile s*: braze's first call minus a warm call, braze's cache",
        "off (Dynamo + AOTAutograd + braze + g++); *s/iter*: the faster of the 2nd and 3rd",
        "calls (training: steps, optimizer included), braze and eager. Single runs, on",
        f"{platform.machine()} with {torch.get_num_threads()} threads: not a benchmark.", "",
        f"Command: `{command}` — torch {', '.join(versions)}; known bugs: "
        "[`conformance/model_bugs.md`](../conformance/model_bugs.md).", "",
        HEADER, "|" + "---|" * (HEADER.count("|") - 1),
    ]
    lines += [row(r) for r in results]
    lines += ["", "Sizes: vision batch 2 at 64x64 pixels, 10 classes; language models batch 2,",
              "32 tokens, vocabulary 1000, hidden size 64, 2 layers (T5: 2 encoder + 2 decoder).",
              "", "## Fallbacks, eager graphs and errors", ""]
    lines += details(results) or ["None."]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")

"""Real loops with changing sizes: GPT-2 generating with its KV cache, BERT over batches of
varying length. Compiles per step and tokens (or sequences) per second, eager vs Inductor vs
braze, in one process.

Run: ``python -m benchmarks.generation [--device cpu] [--tokens 128] [--batches 12]
[--layers N] [--only gpt2|bert]``

Takes: transformers' GPT-2 and BERT with random weights (default configurations, or ``--layers``
fewer layers). Gives: a markdown table per model: per compiler the backend compiles after each
of the first steps and in total (braze: each size class of each graph; Inductor: the graphs
Dynamo handed it), the time of the whole loop with its compiles, the steady-state rate (the
second half of the steps) and whether the output equals eager's (the same greedy tokens; BERT's
hidden states within float32 tolerance). Each compiler starts from a fresh Dynamo and fresh,
private caches. GPT-2 compiles ``model.forward`` and calls ``generate`` (greedy, its dynamic
KV cache grows by one position a step); BERT is called on batches of random lengths 8..384.
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch

from benchmarks.dynamic_sizes import Counting
from benchmarks.run import private_caches

COMPILERS = ("eager", "inductor", "braze")


class Counter:
    """Counts what a compiler compiles: Inductor's graphs (``dynamic_sizes.Counting``), or
    braze's (each size class of each graph, from ``braze.backend.Recording``)."""

    def __init__(self, name: str):
        import braze
        self.name, self.inductor = name, Counting(name)
        self.recording = braze.backend.Recording().__enter__() if name == "braze" else None

    @property
    def count(self) -> int:
        return len(self.recording.graphs) if self.recording else self.inductor.count

    def compile(self, fn):
        return torch.compile(fn, backend="braze" if self.name == "braze" else self.inductor)

    def close(self):
        if self.recording:
            self.recording.__exit__(None, None, None)


def _fresh(compiler: str):
    torch._dynamo.reset()
    private_caches(tempfile.mkdtemp(prefix=f"gen-{compiler}-"))


def gpt2(device: str, tokens: int, layers: int | None):
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(n_layer=layers) if layers else GPT2Config()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval().to(device)
    prompt = torch.randint(0, config.vocab_size, (1, 16), device=device)
    rows, reference = [], None
    for compiler in COMPILERS:
        _fresh(compiler)
        counter = Counter(compiler)
        forward = model.forward
        if compiler != "eager":
            model.forward = counter.compile(forward)
        steps, times = [], []
        with torch.no_grad():
            start = time.perf_counter()
            out = model.generate(prompt, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                                 pad_token_id=0, streamer=_StepClock(counter, steps, times, device))
            total = time.perf_counter() - start
        model.forward = forward
        counter.close()
        reference = out if reference is None else reference
        rate = _steady_rate(times)
        rows.append((compiler, steps, counter.count, total, f"{rate:.1f} tokens/s",
                     "yes" if torch.equal(out, reference) else "no (other tokens)"))
    return rows


class _StepClock:
    """A ``generate`` streamer: after each step, the compiles so far and the time."""

    def __init__(self, counter, steps, times, device):
        self.counter, self.steps, self.times, self.device = counter, steps, times, device

    def put(self, value):
        if self.device != "cpu":
            torch.cuda.synchronize()
        self.times.append(time.perf_counter())
        self.steps.append(self.counter.count)

    def end(self):
        pass


def _steady_rate(times: list) -> float:
    half = times[len(times) // 2:]
    return (len(half) - 1) / (half[-1] - half[0]) if len(half) > 1 else float("nan")


def bert(device: str, batches: int, layers: int | None):
    from transformers import BertConfig, BertModel
    config = BertConfig(num_hidden_layers=layers) if layers else BertConfig()
    torch.manual_seed(0)
    model = BertModel(config).eval().to(device)
    gen = torch.Generator().manual_seed(1)
    lengths = torch.randint(8, 385, (batches,), generator=gen).tolist()
    inputs = [torch.randint(0, config.vocab_size, (4, n), generator=gen).to(device) for n in lengths]
    rows, reference = [], None
    for compiler in COMPILERS:
        _fresh(compiler)
        counter = Counter(compiler)
        fn = model if compiler == "eager" else counter.compile(model)
        steps, times, outs = [], [], []
        with torch.no_grad():
            start = time.perf_counter()
            for ids in inputs:
                outs.append(fn(input_ids=ids).last_hidden_state)
                if device != "cpu":
                    torch.cuda.synchronize()
                times.append(time.perf_counter())
                steps.append(counter.count)
            total = time.perf_counter() - start
        counter.close()
        reference = outs if reference is None else reference
        same = all(torch.allclose(a, b, rtol=1e-3, atol=1e-3) for a, b in zip(outs, reference))
        rows.append((compiler, steps, counter.count, total, f"{_steady_rate(times):.2f} batches/s",
                     "yes" if same else "no"))
    return rows, lengths


def render(title: str, rows: list, unit: str) -> str:
    lines = [f"**{title}**", "", f"| compiler | compiles after steps 1, 2, 3, 4, last | total compiles | "
             f"loop s (compiles included) | steady {unit} | same as eager |", "|---|---|---|---|---|---|"]
    for compiler, steps, count, total, rate, same in rows:
        shown = ", ".join(str(s) for s in steps[:4]) + f", {steps[-1]}" if steps else "-"
        lines.append(f"| {compiler} | {shown} | {count} | {total:.1f} | {rate} | {same} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--layers", type=int, help="fewer layers than the default configurations")
    parser.add_argument("--only", choices=("gpt2", "bert"))
    ns = parser.parse_args(argv)
    import braze  # noqa: F401
    print(f"device {ns.device}, torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    if ns.only in (None, "gpt2"):
        print(render(f"GPT-2 generating {ns.tokens} tokens (greedy, KV cache)",
                     gpt2(ns.device, ns.tokens, ns.layers), "tokens/s"), "\n")
    if ns.only in (None, "bert"):
        rows, lengths = bert(ns.device, ns.batches, ns.layers)
        print(render(f"BERT, batches of 4 sequences of lengths {lengths}", rows, "batches/s"))


if __name__ == "__main__":
    main()

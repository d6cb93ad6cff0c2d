"""The whole models of ``benchmarks.models``, at benchmark size or tiny.

Takes: a model name and ``tiny``. Gives: ``MODELS``, the names, most valuable
first; ``case(name, tiny)``: a ``conformance.zoo.ModelCase`` whose ``build()``
makes the model with random weights (nothing is downloaded; every dropout
probability is 0, so eager and compiled compute the same function in training
mode) and whose ``inputs(generator, training)`` makes its batch; ``batch(name,
tiny)``, that batch in words; ``build(case, device)``, the model on the device;
``Step``: one call of the model, or of a compiled form of it, in a mode:
``infer`` (``torch.no_grad()``, bfloat16 autocast, eval()) or ``train``
(forward, loss, backward; fp32 weights, no optimizer; train()).

Benchmark sizes: GPT-2 small and BERT base (the transformers config defaults), a
LLaMA with hidden 1024, 8 layers, 16 heads, MLP 2816 and vocabulary 32000, each
on 8 sequences of 512 tokens; ResNet-50 (torchvision), 64 images of 224 px;
ViT-B/16 (timm), 32 images of 224 px. Tiny (``--tiny``, a CPU smoke test): the
same families 64 wide and 2 layers deep (ResNet: one bottleneck block per
stage), vocabulary 1000, 2 sequences of 32 tokens or 2 images of 64 px.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree

from conformance.zoo import ModelCase

MODELS = ("gpt2", "llama", "bert", "resnet50", "vit")
SEED = 0


@dataclass(frozen=True)
class Size:
    batch: int
    seq: int = 0      # tokens per sequence (language models)
    vocab: int = 0
    image: int = 0    # pixels per side (vision models)
    classes: int = 0


TINY_TEXT = Size(2, seq=32, vocab=1000)
TINY_IMAGE = Size(2, image=64, classes=10)
TINY_TRANSFORMER = dict(hidden=64, layers=2, heads=2, mlp=128)


def _gpt2(s: Size, tiny: bool):
    from transformers import GPT2Config, GPT2LMHeadModel
    t = TINY_TRANSFORMER
    dims = dict(n_positions=128, n_embd=t["hidden"], n_layer=t["layers"], n_head=t["heads"],
                bos_token_id=0, eos_token_id=0) if tiny else {}
    return GPT2LMHeadModel(GPT2Config(vocab_size=s.vocab, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **dims))


def _bert(s: Size, tiny: bool):
    from transformers import BertConfig, BertForMaskedLM
    t = TINY_TRANSFORMER
    dims = dict(hidden_size=t["hidden"], num_hidden_layers=t["layers"], num_attention_heads=t["heads"],
                intermediate_size=t["mlp"], max_position_embeddings=128) if tiny else {}
    return BertForMaskedLM(BertConfig(vocab_size=s.vocab, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                      **dims))


def _llama(s: Size, tiny: bool):
    from transformers import LlamaConfig, LlamaForCausalLM
    t = TINY_TRANSFORMER
    dims = dict(hidden_size=t["hidden"], num_hidden_layers=t["layers"], num_attention_heads=t["heads"],
                intermediate_size=t["mlp"], max_position_embeddings=128) if tiny else \
        dict(hidden_size=1024, num_hidden_layers=8, num_attention_heads=16, intermediate_size=2816)
    return LlamaForCausalLM(LlamaConfig(vocab_size=s.vocab, attention_dropout=0.0, **dims))


def _resnet50(s: Size, tiny: bool):
    from torchvision.models.resnet import Bottleneck, ResNet  # torchvision's resnet50(): [3, 4, 6, 3]
    return ResNet(Bottleneck, [1, 1, 1, 1] if tiny else [3, 4, 6, 3], num_classes=s.classes)


def _vit(s: Size, tiny: bool):
    import timm
    t = TINY_TRANSFORMER
    dims = dict(embed_dim=t["hidden"], depth=t["layers"], num_heads=t["heads"]) if tiny else {}
    return timm.create_model("vit_base_patch16_224", pretrained=False, img_size=s.image, num_classes=s.classes,
                             drop_rate=0.0, drop_path_rate=0.0, attn_drop_rate=0.0, proj_drop_rate=0.0, **dims)


SPECS = {  # name: (builder, library, benchmark-size batch)
    "gpt2": (_gpt2, "transformers", Size(8, seq=512, vocab=50257)),
    "llama": (_llama, "transformers", Size(8, seq=512, vocab=32000)),
    "bert": (_bert, "transformers", Size(8, seq=512, vocab=30522)),
    "resnet50": (_resnet50, "torchvision", Size(64, image=224, classes=1000)),
    "vit": (_vit, "timm", Size(32, image=224, classes=1000)),
}


def size(name: str, tiny: bool) -> Size:
    full = SPECS[name][2]
    return (TINY_TEXT if full.seq else TINY_IMAGE) if tiny else full


def batch(name: str, tiny: bool) -> str:
    s = size(name, tiny)
    return f"{s.batch}×{s.seq}" if s.seq else f"{s.batch}×3×{s.image}²"


def _tokens(s: Size, gen: torch.Generator, training: bool) -> dict:
    ids = torch.randint(1, s.vocab, (s.batch, s.seq), generator=gen)
    kwargs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if training:
        kwargs["labels"] = torch.randint(1, s.vocab, (s.batch, s.seq), generator=gen)
    return kwargs


def _images(s: Size, gen: torch.Generator, training: bool) -> dict:
    kwargs = {"x": torch.randn(s.batch, 3, s.image, s.image, generator=gen)}
    if training:
        kwargs["target"] = torch.randint(0, s.classes, (s.batch,), generator=gen)
    return kwargs


def case(name: str, tiny: bool) -> ModelCase:
    builder, library, _ = SPECS[name]
    s = size(name, tiny)
    build = functools.partial(builder, s, tiny)
    if s.seq:
        return ModelCase(name, library, build, functools.partial(_tokens, s),
                         output=lambda out: out.logits, loss=lambda out, kw: out.loss)
    return ModelCase(name, library, build, functools.partial(_images, s), output=lambda out: out,
                     loss=lambda out, kw: F.cross_entropy(out, kw["target"]), call=lambda model, kw: model(kw["x"]))


def build(case: ModelCase, device: str) -> torch.nn.Module:
    torch.manual_seed(SEED)
    with torch.device(device):  # random initialization on the device: fast for the large models
        return case.build().to(device)


class Step:
    """One (model, mode) on fixed inputs; ``step(fn)`` calls the model or a compiled form of it once."""

    def __init__(self, case: ModelCase, model: torch.nn.Module, mode: str, device: str):
        self.case, self.model, self.mode, self.device = case, model, mode, device
        model.train(mode == "train")
        gen = torch.Generator().manual_seed(SEED + 1)
        self.kwargs = pytree.tree_map(lambda t: t.to(device), case.inputs(gen, mode == "train"))

    def __call__(self, fn) -> tuple:
        """(output, loss); for train the gradients are left in the parameters' ``.grad``."""
        if self.mode == "infer":
            with torch.no_grad(), torch.autocast(torch.device(self.device).type, torch.bfloat16):
                return self.case.output(self.case.call(fn, self.kwargs)), None
        self.model.zero_grad(set_to_none=True)
        out = self.case.call(fn, self.kwargs)
        loss = self.case.loss(out, self.kwargs)
        loss.backward()
        return self.case.output(out).detach(), loss.detach()

    def grads(self) -> torch.Tensor:
        """Every parameter's gradient (zeros where there is none), concatenated."""
        return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten()
                          for p in self.model.parameters() if p.requires_grad])

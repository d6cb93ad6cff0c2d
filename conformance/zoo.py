"""The models of the conformance run, built from configs with random weights.

Takes: nothing (weights come from the global torch seed; nothing is downloaded).
Gives: ``CASES``, a dict from name to ``ModelCase``: how to build the model, make
its inputs, pick the tensor to compare and compute a training loss.

Vision models come from timm (which needs torchvision), language models from
transformers with tiny configs. Every dropout probability is 0 so that eager and
braze compute the same function in training mode.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

BATCH = 2
SEQ = 32
VOCAB = 1000
IMAGE = 64  # pixels; ViT-tiny is built for this size (patch 16: 16 tokens)
CLASSES = 10


@dataclass(frozen=True)
class ModelCase:
    name: str
    library: str  # the package it needs: "timm" or "transformers"
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[torch.Generator, bool], dict]  # (generator, training) -> kwargs
    output: Callable[[object], torch.Tensor]  # model output -> the tensor compared
    loss: Callable[[object, dict], torch.Tensor]  # (model output, kwargs) -> scalar
    call: Callable[[torch.nn.Module, dict], object] = lambda model, kw: model(**kw)

    def available(self) -> bool:
        names = ["timm", "torchvision"] if self.library == "timm" else [self.library]
        return all(importlib.util.find_spec(n) is not None for n in names)


# ---------------------------------------------------------------- vision (timm)

def _timm(name: str, **kwargs) -> Callable[[], torch.nn.Module]:
    def build():
        import timm
        return timm.create_model(name, pretrained=False, num_classes=CLASSES,
                                 drop_rate=0.0, drop_path_rate=0.0, **kwargs)
    return build


def _image_inputs(gen: torch.Generator, training: bool) -> dict:
    kwargs = {"x": torch.randn(BATCH, 3, IMAGE, IMAGE, generator=gen)}
    if training:
        kwargs["target"] = torch.randint(0, CLASSES, (BATCH,), generator=gen)
    return kwargs


def _vision_case(name: str, timm_name: str, **kwargs) -> ModelCase:
    return ModelCase(name, "timm", _timm(timm_name, **kwargs),
                     _image_inputs, output=lambda out: out,
                     loss=lambda out, kw: F.cross_entropy(out, kw["target"]),
                     call=lambda model, kw: model(kw["x"]))


# ------------------------------------------------------- language (transformers)

def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(
        vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))


def _bert():
    from transformers import BertConfig, BertForMaskedLM
    return BertForMaskedLM(BertConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, max_position_embeddings=128,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        attention_dropout=0.0))


def _t5():
    from transformers import T5Config, T5ForConditionalGeneration
    return T5ForConditionalGeneration(T5Config(
        vocab_size=VOCAB, d_model=64, d_kv=32, d_ff=128, num_layers=2, num_decoder_layers=2,
        num_heads=2, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0))


def _token_inputs(gen: torch.Generator, training: bool) -> dict:
    ids = torch.randint(1, VOCAB, (BATCH, SEQ), generator=gen)
    kwargs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if training:
        kwargs["labels"] = torch.randint(1, VOCAB, (BATCH, SEQ), generator=gen)
    return kwargs


def _seq2seq_inputs(gen: torch.Generator, training: bool) -> dict:
    kwargs = _token_inputs(gen, True)
    if not training:  # inference: teacher-forced decoder inputs instead of labels
        kwargs["decoder_input_ids"] = kwargs.pop("labels")
    return kwargs


def _lm_case(name: str, build, inputs=_token_inputs) -> ModelCase:
    return ModelCase(name, "transformers", build, inputs,
                     output=lambda out: out.logits, loss=lambda out, kw: out.loss)


CASES = {case.name: case for case in [
    _vision_case("resnet18", "resnet18"),
    _vision_case("mobilenetv3_small", "mobilenetv3_small_100"),
    _vision_case("convnext_atto", "convnext_atto"),
    _vision_case("vit_tiny", "vit_tiny_patch16_224", img_size=IMAGE),
    _lm_case("gpt2", _gpt2),
    _lm_case("bert", _bert),
    _lm_case("llama", _llama),
    _lm_case("t5", _t5, _seq2seq_inputs),
]}

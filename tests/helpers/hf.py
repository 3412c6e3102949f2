"""Tiny random Hugging Face Llama folders made in the test (no hub), and logits compared across the two."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from lit_modules.export.byte_tokenizer import byte_tokenizer_json

SMALL = dict(vocab_size=259, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=128, rope_theta=10000.0, rms_norm_eps=1e-6,
             tie_word_embeddings=False)


def hf_folder(path: Path, seed: int = 0, shard: bool = False, tokenizer: bool = True, **config) -> Path:
    """A random LlamaForCausalLM saved with save_pretrained (sharded safetensors with an index if `shard`),
    with the byte tokenizer's tokenizer.json; weights drawn with std 0.1 so a wrong mapping shows."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**{**SMALL, **config}))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)  # norms not all ones: a swapped norm shows too
            else:
                p.normal_(0, 0.1)
    model.save_pretrained(path, max_shard_size="40KB" if shard else "10GB")
    if tokenizer:
        (Path(path) / "tokenizer.json").write_text(byte_tokenizer_json())
    return Path(path)


def edit_config(folder: Path, **changes) -> None:
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    for key, value in changes.items():
        if value is DROP:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    path.write_text(json.dumps(cfg))


DROP = object()


def hf_logits(folder: Path, x: torch.Tensor) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        return model(x).logits


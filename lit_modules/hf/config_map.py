"""A Hugging Face Llama `config.json` <-> our `LlamaConfig`.

In: every field that changes what the network computes is either mapped (sizes, GQA, rope_theta,
rms_norm_eps, tied head, max_position_embeddings) or, where our model lacks it (RoPE scaling, biases,
another activation or architecture, dropout, quantization), refused in one sentence naming the field.
Fields that do not change the function (initializer_range, use_cache, dtype, token ids, ...) are ignored.
Out: the config.json transformers reads as the same network.
"""

from __future__ import annotations

from typing import Any

from lit_modules.hf import ModelFolderError
from lit_modules.model.config import LlamaConfig

ARCHITECTURE = "LlamaForCausalLM"
REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
# Their defaults (transformers' LlamaConfig) for what a config.json may leave out.
DEFAULTS = {"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 2048,
            "tie_word_embeddings": False}


def _refuse(where: str, field: str, value: Any, why: str) -> ModelFolderError:
    return ModelFolderError(f"{where}/config.json has {field}={value!r}, which this platform's Llama cannot represent ({why}).")


def _rope_theta(hf: dict, where: str) -> float:
    """rope_theta from transformers 4's `rope_theta` + `rope_scaling` or 5's `rope_parameters`."""
    scaling = hf.get("rope_scaling")
    if scaling not in (None, {}) and not (isinstance(scaling, dict) and scaling.get("rope_type", scaling.get("type")) == "default"
                                          and set(scaling) <= {"rope_type", "type", "rope_theta"}):
        raise _refuse(where, "rope_scaling", scaling, "only plain RoPE is implemented, no scaled variant")
    theta = hf.get("rope_theta")
    params = hf.get("rope_parameters")
    if params is not None:
        if not isinstance(params, dict):
            raise _refuse(where, "rope_parameters", params, "expected a mapping")
        kind = params.get("rope_type", "default")
        if kind != "default":
            raise _refuse(where, "rope_parameters.rope_type", kind, "only plain RoPE is implemented")
        extra = sorted(set(params) - {"rope_type", "rope_theta"})
        if extra:
            raise _refuse(where, f"rope_parameters.{extra[0]}", params[extra[0]], "only plain RoPE is implemented")
        theta = params.get("rope_theta", theta)
    return float(DEFAULTS["rope_theta"] if theta is None else theta)


def llama_config_from_hf(hf: dict, where: str) -> LlamaConfig:
    """Our LlamaConfig for a Hugging Face Llama config.json (`where` names the folder in refusals)."""
    model_type = hf.get("model_type")
    if model_type != "llama":
        raise _refuse(where, "model_type", model_type, "only Llama models are supported")
    architectures = hf.get("architectures")
    if architectures is not None and list(architectures) != [ARCHITECTURE]:
        raise _refuse(where, "architectures", architectures, f"only {ARCHITECTURE} is supported")
    for field in REQUIRED:
        if not isinstance(hf.get(field), int):
            raise ModelFolderError(f"{where}/config.json lacks {field} (an integer), which the model's size needs.")
    act = hf.get("hidden_act", "silu")
    if act != "silu":
        raise _refuse(where, "hidden_act", act, "the MLP is SwiGLU with SiLU")
    for field in ("attention_bias", "mlp_bias"):
        if hf.get(field):
            raise _refuse(where, field, hf[field], "every Linear is bias-free")
    if hf.get("attention_dropout"):
        raise _refuse(where, "attention_dropout", hf["attention_dropout"], "there is no dropout")
    if hf.get("quantization_config") is not None:
        raise _refuse(where, "quantization_config", "...", "weights are trained in full precision")
    heads = hf["num_attention_heads"]
    head_dim = hf.get("head_dim")
    if head_dim is not None and head_dim != hf["hidden_size"] // heads:
        raise _refuse(where, "head_dim", head_dim, f"head_dim is hidden_size / num_attention_heads = "
                                                   f"{hf['hidden_size'] // heads}")
    if int(hf.get("pretraining_tp", 1) or 1) != 1:
        raise _refuse(where, "pretraining_tp", hf["pretraining_tp"], "only pretraining_tp=1 is implemented")
    kv = hf.get("num_key_value_heads")
    cfg = LlamaConfig(
        name=where.rstrip("/").rsplit("/", 1)[-1] or "hf",
        vocab_size=hf["vocab_size"],
        d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=heads,
        n_kv_heads=None if kv in (None, heads) else int(kv),
        d_ff=hf["intermediate_size"],
        max_seq_len=int(hf.get("max_position_embeddings") or DEFAULTS["max_position_embeddings"]),
        rope_theta=_rope_theta(hf, where),
        norm_eps=float(hf.get("rms_norm_eps", DEFAULTS["rms_norm_eps"])),
        tie_embeddings=bool(hf.get("tie_word_embeddings", DEFAULTS["tie_word_embeddings"])),
    )
    problems = cfg.problems()
    if problems:
        raise ModelFolderError(f"{where}/config.json describes a model this platform cannot build: {problems[0]}")
    return cfg


def hf_config_from_llama(cfg: LlamaConfig, bos_id: int | None, eos_id: int | None, pad_id: int | None) -> dict:
    """The config.json of `cfg` as a Hugging Face LlamaForCausalLM; ModelFolderError for what it lacks."""
    if cfg.attn_gate != "none":
        raise ModelFolderError(f"model.attn_gate={cfg.attn_gate} has no Hugging Face Llama equivalent, so this run "
                          "cannot be exported in that format.")
    if cfg.is_moe:
        raise ModelFolderError(f"model.n_experts={cfg.n_experts} (a mixture of experts) has no Hugging Face Llama "
                          "equivalent, so this run cannot be exported in that format.")
    return {
        "architectures": [ARCHITECTURE],
        "model_type": "llama",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.d_ff,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_seq_len,
        "rms_norm_eps": cfg.norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "pretraining_tp": 1,
        "tie_word_embeddings": cfg.tie_embeddings,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "pad_token_id": pad_id,
        "initializer_range": 0.02,
        "use_cache": True,
        "torch_dtype": "float32",
    }

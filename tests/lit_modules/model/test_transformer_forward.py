"""Llama forward: logits and hidden states, length limit, structured configs, names, bf16, imports."""

import pytest
import torch

from lit_modules.model import Llama, LlamaConfig
from tests.helpers.tiny_llama import VOCAB, build, make_cfg, tokens


# --------------------------------------------------------------------- shapes


def test_forward_shapes_and_hidden_states():
    model = build()
    idx = tokens()
    logits = model(idx)
    assert logits.shape == (2, 12, VOCAB) and logits.dtype == torch.float32
    logits2, hidden = model(idx, return_hidden=True)
    assert torch.equal(logits, logits2)
    assert len(hidden) == model.cfg.n_layers + 1
    assert all(h.shape == (2, 12, 32) for h in hidden)
    assert torch.equal(hidden[0], model.tok_emb(idx))
    assert torch.allclose(model.lm_head(model.final_norm(hidden[-1])), logits)


def test_too_long_sequence_raises():
    model = build(max_seq_len=8)
    with pytest.raises(ValueError, match="max_seq_len"):
        model(tokens(length=9))
    model(tokens(length=8))


def test_accepts_omegaconf_structured_config():
    from omegaconf import OmegaConf

    cfg = OmegaConf.structured(make_cfg())
    model = Llama(cfg)
    assert isinstance(model.cfg, LlamaConfig)
    assert model(tokens()).shape == (2, 12, VOCAB)


def test_no_lightning_or_hydra_imports():
    import subprocess
    import sys

    code = (
        "import sys, lit_modules.model; "
        "bad = [m for m in ('lightning', 'pytorch_lightning', 'hydra') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_model_runs_under_bf16_autocast():
    model = build()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(tokens())
    assert torch.isfinite(out.float()).all()


def test_block_param_names():
    names = {n for n, _ in build(attn_gate="elementwise").named_parameters()}
    layer = "layers.0."
    expected = {
        "attn_norm.weight", "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight",
        "attn.o_proj.weight", "attn.gate_proj.weight", "mlp_norm.weight",
        "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
    }
    assert {n[len(layer):] for n in names if n.startswith(layer)} == expected
    assert {"tok_emb.weight", "final_norm.weight", "lm_head.weight"} <= names

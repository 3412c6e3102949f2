"""Attention sink: the pure reduction on constructed probabilities, and the registry on a real Llama."""

import math
from functools import partial
from pathlib import Path

import pytest
import torch

from lit_modules.diagnostics import REGISTRY, DiagnosticContext
from lit_modules.diagnostics.attention_sink import sink_share, sink_share_per_head, uniform_sink_share
from lit_modules.model import InitConfig
from tests.helpers.models import small_llama


def uniform_causal(batch: int, heads: int, seq: int) -> torch.Tensor:
    mask = torch.ones(seq, seq).tril()
    return (mask / mask.sum(dim=1, keepdim=True)).expand(batch, heads, seq, seq).clone()


def test_uniform_causal_attention_gives_the_harmonic_reference():
    # T = 4: queries t = 1, 2, 3 put 1/2, 1/3, 1/4 on key 0 -> mean 13/36.
    assert uniform_sink_share(4) == pytest.approx(13 / 36)
    probs = [uniform_causal(2, 3, 4), uniform_causal(2, 3, 4)]
    torch.testing.assert_close(sink_share(probs), torch.full((2,), 13 / 36))


def test_constructed_heads_give_known_per_head_and_layer_values():
    seq = 5
    all_on_first = torch.zeros(seq, seq)
    all_on_first[:, 0] = 1.0  # a full sink
    diagonal = torch.eye(seq)  # every query attends to itself: no mass on key 0 for t > 0
    layer0 = torch.stack([all_on_first, diagonal])[None]  # [1, 2, T, T]
    layer1 = torch.stack([uniform_causal(1, 1, seq)[0, 0], diagonal])[None]
    per_head = sink_share_per_head([layer0, layer1])
    expected_uniform = uniform_sink_share(seq)
    torch.testing.assert_close(per_head, torch.tensor([[1.0, 0.0], [expected_uniform, 0.0]]))
    torch.testing.assert_close(sink_share([layer0, layer1]), torch.tensor([0.5, expected_uniform / 2]))


def test_query_zero_is_excluded_and_batch_is_averaged():
    a = uniform_causal(1, 1, 3)
    b = torch.eye(3)[None, None]  # b's query 0 has probability 1 on key 0 and must not count
    both = torch.cat([a, b])
    torch.testing.assert_close(sink_share([both]), torch.tensor([(uniform_sink_share(3) + 0.0) / 2]))


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="at least two tokens"):
        sink_share([torch.ones(1, 1, 1, 1)])
    with pytest.raises(ValueError, match=r"\[B, H, T, T\]"):
        sink_share([torch.ones(1, 3, 3)])


# Three layers, drawn from seed 0 by fan_in_power with gamma 0.5.
tiny_llama = partial(small_llama, init=InitConfig(rule="fan_in_power", gamma=0.5), n_layers=3, d_ff=64)


def context(model, tmp_path: Path, tokens: torch.Tensor) -> DiagnosticContext:
    return DiagnosticContext(model=model, tokens=tokens, step=0, artifact_dir=tmp_path)


TOKENS = torch.randint(0, 50, (3, 10), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("attn_gate", ["none", "elementwise"])
def test_registry_matches_the_pure_function_on_a_real_model(tmp_path, attn_gate):
    model = tiny_llama(attn_gate=attn_gate).eval()
    m = REGISTRY["attention_sink"](context(model, tmp_path, TOKENS)).metrics
    per_head = sink_share_per_head(model.attention_probs(TOKENS))
    for layer in range(3):
        assert m[f"attention_sink/layers.{layer}"] == pytest.approx(per_head[layer].mean().item(), rel=1e-5)
        max_head = m[f"attention_sink/layers.{layer}/max_head"]
        assert max_head == pytest.approx(per_head[layer].max().item(), rel=1e-5)
    assert m["attention_sink/mean"] == pytest.approx(per_head.mean().item(), rel=1e-5)
    assert m["attention_sink/max_head"] == pytest.approx(per_head.max().item(), rel=1e-5)
    assert m["attention_sink/uniform_reference"] == pytest.approx(uniform_sink_share(10))
    assert all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in m.values())


def test_zero_queries_and_keys_give_uniform_attention_in_every_layer(tmp_path):
    model = tiny_llama().eval()
    with torch.no_grad():
        for block in model.layers:
            block.attn.q_proj.weight.zero_()
            block.attn.k_proj.weight.zero_()
    m = REGISTRY["attention_sink"](context(model, tmp_path, TOKENS)).metrics
    for layer in range(3):
        assert m[f"attention_sink/layers.{layer}"] == pytest.approx(uniform_sink_share(10), rel=1e-5)
    assert m["attention_sink/max_head"] == pytest.approx(uniform_sink_share(10), rel=1e-5)

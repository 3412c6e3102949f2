"""Attention's hook points (pre_rope, scores, heads): identity hooks preserve the function exactly, each point
receives what its docstring says, a hook's parameters train and are saved, and no hook changes nothing."""

import pytest
import torch
from torch import nn

from lit_modules.model import LlamaConfig
from lit_modules.model.attention import HOOK_POINTS, Attention
from lit_modules.model.rope import precompute_rope
from lit_modules.model.transformer import Llama

CFG = LlamaConfig(vocab_size=32, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=64, max_seq_len=16)


class IdentityQK(nn.Module):
    def forward(self, q, k):
        return q, k


class Record(nn.Module):
    """Identity that keeps the shape it saw."""

    def __init__(self):
        super().__init__()
        self.shapes = []

    def forward(self, *xs):
        self.shapes.append([tuple(x.shape) for x in xs])
        return xs if len(xs) > 1 else xs[0]


class QKScale(nn.Module):
    """A trick of one's own with a parameter: a learnable scale on queries before RoPE."""

    def __init__(self, heads: int):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1, heads, 1, 1))

    def forward(self, q, k):
        return q * self.scale, k


def _pair():
    torch.manual_seed(0)
    plain = Attention(CFG)
    hooked = Attention(CFG)
    hooked.load_state_dict(plain.state_dict())
    x = torch.randn(2, 8, CFG.d_model)
    cos, sin = precompute_rope(CFG.head_dim, 8, CFG.rope_theta)
    return plain, hooked, x, cos, sin


def test_no_hook_adds_nothing():
    plain, _, _, _, _ = _pair()
    assert "hooks" not in dict(plain.named_modules()) and all("hooks" not in k for k in plain.state_dict())


@pytest.mark.parametrize("point", HOOK_POINTS)
def test_an_identity_hook_preserves_the_function(point):
    plain, hooked, x, cos, sin = _pair()
    hooked.add_hook(point, IdentityQK() if point == "pre_rope" else nn.Identity())
    # The scores hook switches SDPA for explicit attention: equal to rounding, not bit for bit.
    atol = 1e-6 if point == "scores" else 0.0
    torch.testing.assert_close(hooked(x, cos, sin), plain(x, cos, sin), atol=atol, rtol=0)
    torch.testing.assert_close(hooked.attention_probs(x, cos, sin), plain.attention_probs(x, cos, sin), atol=1e-6, rtol=0)


def test_each_point_receives_its_tensors():
    _, hooked, x, cos, sin = _pair()
    seen = {p: Record() for p in HOOK_POINTS}
    for point, module in seen.items():
        hooked.add_hook(point, module)
    hooked(x, cos, sin)
    B, T, H, KV, hd = 2, 8, CFG.n_heads, CFG.kv_heads, CFG.head_dim
    assert seen["pre_rope"].shapes == [[(B, H, T, hd), (B, KV, T, hd)]]  # keys before the GQA expansion
    assert seen["scores"].shapes == [[(B, H, T, T)]]
    assert seen["heads"].shapes == [[(B, T, H, hd)]]


def test_a_scores_hook_acts_before_the_causal_mask_and_softmax():
    _, hooked, x, cos, sin = _pair()
    hooked.add_hook("scores", nn.Identity())
    flat = Attention(CFG)
    flat.load_state_dict(hooked.state_dict())

    class Zero(nn.Module):
        def forward(self, s):
            return torch.zeros_like(s)

    flat.add_hook("scores", Zero())  # uniform attention over the past: each position averages v[:t+1]
    probs = flat.attention_probs(x, cos, sin)[0, 0]
    expected = torch.tril(torch.ones(8, 8)) / torch.arange(1, 9).unsqueeze(1)
    torch.testing.assert_close(probs, expected)


def test_a_heads_hook_sees_the_heads_before_the_output_projection():
    _, hooked, x, cos, sin = _pair()

    class Silence(nn.Module):
        def forward(self, y):
            return torch.zeros_like(y)

    hooked.add_hook("heads", Silence())
    assert torch.count_nonzero(hooked(x, cos, sin)) == 0  # o_proj has no bias


def test_a_hooks_parameters_train_and_are_saved_with_the_model():
    torch.manual_seed(0)
    model = Llama(CFG)
    for block in model.layers:
        block.attn.add_hook("pre_rope", QKScale(CFG.n_heads))
    keys = [k for k in model.state_dict() if "hooks" in k]
    assert keys == ["layers.0.attn.hooks.pre_rope.0.scale", "layers.1.attn.hooks.pre_rope.0.scale"]
    idx = torch.randint(0, CFG.vocab_size, (2, 8))
    model(idx).float().pow(2).mean().backward()
    assert model.layers[0].attn.hooks["pre_rope"][0].scale.grad.abs().sum() > 0


def test_an_unknown_point_is_refused():
    with pytest.raises(ValueError, match="unknown attention hook point 'post'"):
        Attention(CFG).add_hook("post", nn.Identity())

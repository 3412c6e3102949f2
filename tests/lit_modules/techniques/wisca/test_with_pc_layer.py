"""WISCA on PC-parametrized weights (pc_layer=level*): exact where the PC map carries a scale, refused before any
compute where it cannot, and never sampled broken by the default sweep.

With the PC layer, `attn.o_proj.weight` is computed: W_eff = gamma * sg(sigma) * p(W / sigma), sigma = u^T W v
+ eps, from the raw `parametrizations.weight.original`. A rescale must therefore go to the raw weight, which
scales W_eff by the same factor exactly when the map is positively homogeneous of degree 1 (norm recovery
on; any per-row/column scale only at level 0), and the optimizer state lives on that raw weight too.
"""

from __future__ import annotations

import copy
import itertools
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from omegaconf import DictConfig
from torch.nn.utils import parametrize

from lit_modules.build import build_model, build_techniques
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from lit_modules.techniques.pc_layer.parametrization import PCParametrization, attach_pc, raw_weight, refresh_all
from lit_modules.techniques.scalable_weight import scalable_weight, scaling_problem
from lit_modules.techniques.wisca import Wisca
from lit_modules.techniques.wisca.callback import WiscaTransitions
from lit_modules.config.composition import compose_run_config

# ------------------------------------------------------------------ the PC map and the power iteration


def _pc(level: int, recover_norm: bool = True, learnable_gamma: bool = True, shape=(24, 16)):
    pc = PCParametrization(shape, level=level, recover_norm=recover_norm, learnable_gamma=learnable_gamma)
    if pc.gamma is not None:
        with torch.no_grad():
            pc.gamma.fill_(1.7)  # a trained-looking gamma, not the init 1
    return pc


def _weight(shape=(24, 16), seed: int = 0) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 0.3


def _assert_close(actual: torch.Tensor, expected: torch.Tensor, tol: float = 5e-6) -> None:
    """Equal up to fp32 rounding, which grows with the values: max |error| <= tol * max |expected|."""
    error = (actual - expected).abs().max().item()
    assert error <= tol * expected.abs().max().item(), error


@pytest.mark.parametrize("learnable_gamma", [True, False])
@pytest.mark.parametrize("level", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("iters", [1, 30])
def test_pc_map_with_norm_recovery_is_positively_homogeneous(level, learnable_gamma, iters):
    """The math, in float64 with eps = 0: f(cW) = c f(W) for every c > 0 and ANY u, v (one power iteration,
    far from converged, or thirty): sigma(cW) = c sigma(W), p(cW / sigma(cW)) = p(W / sigma(W)), and the
    recovered sg(sigma) carries c."""
    pc = PCParametrization((24, 16), level=level, learnable_gamma=learnable_gamma, eps=0.0).double()
    w = _weight().double()
    if pc.gamma is not None:
        with torch.no_grad():
            pc.gamma.fill_(1.7)
    pc.refresh(w, iters=iters)
    with torch.no_grad():
        for c in (0.05, 0.37, 2.9, 40.0):
            _assert_close(pc(c * w), c * pc(w), tol=1e-12)
    assert pc.scaling_problem("tensor") is None


@pytest.mark.parametrize("level", [0, 2, 4])
def test_pc_map_is_homogeneous_to_fp32_rounding_as_trained(level):
    """fp32 and the real eps (1e-7): sigma(cW) = c sigma(W) + (1 - c) eps, negligible against a refreshed
    sigma (~ the top singular value). A periodic transition always meets refreshed u, v: the refresh runs at
    train start and after every optimizer step."""
    pc, w = _pc(level), _weight()
    pc.refresh(w, iters=30)
    with torch.no_grad():
        for c in (0.05, 0.37, 2.9, 40.0):
            _assert_close(pc(c * w), c * pc(w))


def test_homogeneity_holds_for_the_stop_gradient_sigma_too():
    """The surrogate gradient through sg(sigma) maps like a true one: grad at cW = grad at W (degree 0)."""
    pc, w = _pc(4), _weight()
    pc.refresh(w, iters=30)
    upstream = torch.randn(24, 16, generator=torch.Generator().manual_seed(5))
    grads = []
    for c in (1.0, 0.4):
        raw = (c * w).requires_grad_(True)
        (pc(raw) * upstream).sum().backward()
        grads.append(raw.grad)
    # L'(X) = L(X / c) seen from the other side: the raw gradient at cW is the gradient at W, i.e. the
    # rescaled weight's gradient is g / factor with factor = c, which is what opt_state=rescale assumes.
    _assert_close(grads[1], grads[0])


def test_power_iteration_finds_the_same_directions_on_a_scaled_weight():
    """u, v are directions: refreshing them on cW gives the same buffers, so the next forward after the
    usual per-step refresh still computes exactly c * W_eff."""
    w = _weight()
    plain, scaled = _pc(4), _pc(4)
    plain.refresh(w, iters=10)
    scaled.refresh(0.3 * w, iters=10)
    torch.testing.assert_close(scaled.u, plain.u, rtol=0, atol=1e-6)
    torch.testing.assert_close(scaled.v, plain.v, rtol=0, atol=1e-6)
    with torch.no_grad():
        _assert_close(scaled(0.3 * w), 0.3 * plain(w))


@pytest.mark.parametrize("level", [0, 4])
def test_without_norm_recovery_the_scale_is_lost(level):
    """recover_norm=false: f(cW) = f(W), so scaling the raw weight cannot scale W_eff (hence refused)."""
    pc, w = _pc(level, recover_norm=False), _weight()
    pc.refresh(w, iters=30)
    with torch.no_grad():
        _assert_close(pc(0.3 * w), pc(w))
    assert "recover_norm=false" in pc.scaling_problem("tensor")


def test_a_per_row_scale_commutes_with_level_0_only():
    rows = torch.linspace(0.2, 3.0, 24)[:, None]
    w = _weight()
    identity, level4 = _pc(0), _pc(4)
    for pc in (identity, level4):
        pc.refresh(w, iters=30)
    with torch.no_grad():
        _assert_close(identity(rows * w), rows * identity(w))
        assert (level4(rows * w) - rows * level4(w)).abs().max() > 1e-2 * level4(w).abs().max()
    assert identity.scaling_problem("rows") is None and identity.scaling_problem("columns") is None
    assert "does not commute" in level4.scaling_problem("columns")
    assert level4.scaling_problem("tensor") is None


def test_a_parametrization_without_a_scaling_rule_is_never_scaled_through():
    class Doubled(torch.nn.Module):
        def forward(self, weight):
            return 2 * weight

    plain, wrapped, pc = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    parametrize.register_parametrization(wrapped, "weight", Doubled())
    attach_pc(pc, "pc", level=4)
    assert scalable_weight(plain, "columns") is plain.weight and scaling_problem(plain, "rows") is None
    assert "declares no scaling rule" in scaling_problem(wrapped, "tensor")
    with pytest.raises(ValueError, match="Cannot rescale this weight exactly"):
        scalable_weight(wrapped, "tensor")
    assert scalable_weight(pc, "tensor") is pc.parametrizations.weight.original
    assert "per-column" in scaling_problem(pc, "columns")


# ------------------------------------------------------------------ WISCA x PC x gate x GQA, end to end

VOCAB = 61
SEQ = 24
# fp32 rounding of the (fp32) scales and weights, through softmax; the defect this guards against moved the
# logits by ~3e-2 of their largest value.
LOGIT_TOL = 2e-5
WISCA_OPTIONS = {
    "qk_tensor": ["wisca=qk_tensor"],
    "vo_tensor": ["wisca=vo_tensor"],
    "qk_vo_tensor": ["wisca=qk_vo_tensor"],
    "qk_channel_vo_tensor": ["wisca=qk_channel_vo_tensor"],
    "qk_vo_channel": ["wisca=qk_vo_tensor", "techniques.wisca.qk_granularity=channel",
                      "techniques.wisca.vo_granularity=channel"],
    "qk_vo_tensor_init": ["wisca=qk_vo_tensor_init"],
}
ALL_TARGETS = "[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj]"
PC_OPTIONS = {
    "none": [],
    "level2": ["pc_layer=level2"],
    "level4": ["pc_layer=level4"],
    "level4_no_gamma": ["pc_layer=level4", "techniques.pc_layer.learnable_gamma=false"],
    "level4_all_targets": ["pc_layer=level4", f"techniques.pc_layer.targets={ALL_TARGETS}"],
    "level0_all_targets": ["pc_layer=level0", f"techniques.pc_layer.targets={ALL_TARGETS}"],
    "level4_no_recover": ["pc_layer=level4", "techniques.pc_layer.recover_norm=false"],
    "level4_no_recover_ffn_only": ["pc_layer=level4", "techniques.pc_layer.recover_norm=false",
                                   "techniques.pc_layer.targets=[gate_proj,up_proj,down_proj]"],
}
# The spec, written out by hand: which combinations cannot be exact, and the weight that makes them so.
# The at-init transition counts too: it scales raw weights before the PC layer is attached, which is the
# same as scaling them after, so the map must carry the scale all the same.
CHANNEL_OPTIONS = ("qk_channel_vo_tensor", "qk_vo_channel")
VO_OPTIONS = ("vo_tensor", "qk_vo_tensor", "qk_vo_tensor_init", *CHANNEL_OPTIONS)
REFUSED = {
    **{("qk_vo_channel", pc): "o_proj" for pc in ("level2", "level4", "level4_no_gamma")},
    **{(w, "level4_all_targets"): "q_proj" for w in CHANNEL_OPTIONS},
    **{(w, "level4_no_recover"): "o_proj" for w in VO_OPTIONS},
}
GATES = ("none", "elementwise", "headwise")
KV_HEADS = {"mha": None, "gqa": 2}  # CPU-tiny: d_model 64, 4 heads of 16
VARIANTS = list(itertools.product(GATES, KV_HEADS))


def _compose(wisca: str, pc: str, gate: str = "none", kv: str = "mha") -> DictConfig:
    periodic = [] if wisca == "qk_vo_tensor_init" else ["techniques.wisca.every_n_steps=5"]
    cfg = compose_run_config([
        "model=tiny", "model.max_seq_len=32", f"model.vocab_size={VOCAB}", "regime=steps",
        "trainer.max_steps=10", "data.seq_len=32", *WISCA_OPTIONS[wisca], *PC_OPTIONS[pc], *periodic,
        "techniques.wisca.opt_state=rescale",
    ])
    return _variant(cfg, gate, kv)


def _variant(cfg: DictConfig, gate: str, kv: str) -> DictConfig:
    cfg = copy.deepcopy(cfg)
    cfg.model.attn_gate, cfg.model.n_kv_heads = gate, KV_HEADS[kv]
    return cfg


def _tokens(seed: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (4, SEQ), generator=torch.Generator().manual_seed(seed))


def _holder(module: torch.nn.Module) -> torch.Tensor:
    """The tensor that holds a Linear's weight: the raw PC weight, or the plain one."""
    return raw_weight(module) if hasattr(module, "parametrizations") else module.weight


@torch.no_grad()
def _unbalance(model: torch.nn.Module, seed: int) -> None:
    """Rows (o: columns) of very different size and a global imbalance: every WISCA scale is far from 1."""
    gen = torch.Generator().manual_seed(seed)
    for layer in model.layers:
        attn = layer.attn
        for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
            w = _holder(proj)
            w.mul_(10 ** (torch.rand(w.shape[0], 1, generator=gen) - 0.5))
        o = _holder(attn.o_proj)
        o.mul_(10 ** (torch.rand(1, o.shape[1], generator=gen) - 0.5) * 0.05)
        _holder(attn.q_proj).mul_(3.0)


def _train_a_little(model: torch.nn.Module, steps: int = 2) -> torch.optim.Optimizer:
    """A few real AdamW steps (with the PC refresh after each), so weights and optimizer state are trained."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)  # small: keeps the imbalance
    refresh_all(model, 10)  # as PowerIterationRefresh does at train start
    for step in range(steps):
        idx = _tokens(100 + step)
        loss = F.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        refresh_all(model, 10)
    return optimizer


def _moments(optimizer: torch.optim.Optimizer) -> dict[int, dict[str, torch.Tensor]]:
    return {id(p): {k: v.clone() for k, v in s.items() if k != "step"} for p, s in optimizer.state.items()}


def _check_periodic_transition(cfg: DictConfig) -> None:
    techniques = build_techniques(cfg)
    model, _ = build_model(cfg, techniques)
    _unbalance(model, seed=3)
    optimizer = _train_a_little(model)
    (callback,) = [c for t in techniques for c in t.callbacks() if isinstance(c, WiscaTransitions)]
    state_before = _moments(optimizer)
    recorded = []
    original = callback.technique.transition
    callback.technique.transition = lambda m: recorded.append(original(m)) or recorded[-1]
    idx = _tokens(0)
    with torch.no_grad():
        before = model(idx)
    trainer = SimpleNamespace(global_step=callback.technique.every_n_steps, logger=None, optimizers=[optimizer])
    callback.on_train_batch_end(trainer, SimpleNamespace(model=model), None, None, 0)
    with torch.no_grad():
        after = model(idx)
    assert callback.transitions == 1
    _assert_close(after, before, tol=LOGIT_TOL)
    # The transition really moved the weights it owns (else the check above proves nothing) ...
    (rescales, _), = recorded
    assert len(rescales) == 2 * (callback.technique.qk + callback.technique.vo) * len(model.layers)
    assert all((r.factor - 1).abs().max() > 0.05 for r in rescales)
    # ... and every rescaled weight is a tensor the optimizer holds state for: m / S, v / S^2 (rescale).
    params = {id(p) for group in optimizer.param_groups for p in group["params"]}
    for r in rescales:
        assert id(r.param) in params, f"{r.name} is not a trained tensor"
        old, new = state_before[id(r.param)], optimizer.state[r.param]
        factor = r.factor.to(old["exp_avg"].dtype)
        torch.testing.assert_close(new["exp_avg"], old["exp_avg"] / factor, rtol=1e-6, atol=0)
        torch.testing.assert_close(new["exp_avg_sq"], old["exp_avg_sq"] / factor**2, rtol=1e-6, atol=0)


def _check_init_transition(cfg: DictConfig) -> None:
    """At init the transition runs inside build_model; the model must equal the one built without it."""
    with_wisca = build_techniques(cfg)
    without = [t for t in with_wisca if not isinstance(t, Wisca)]
    model, _ = build_model(cfg, with_wisca)
    reference, _ = build_model(cfg, without)
    for built in (model, reference):
        refresh_all(built, 10)  # as PowerIterationRefresh does at train start
    idx = _tokens(0)
    with torch.no_grad():
        _assert_close(model(idx), reference(idx), tol=LOGIT_TOL)


def _check_combination(base: DictConfig, wisca: str, pc: str, gate: str, kv: str) -> None:
    cfg = _variant(base, gate, kv)
    weight = REFUSED.get((wisca, pc))
    if weight is not None:
        with pytest.raises(ConfigError) as err:
            validate(cfg)
        sentences = [s for s in str(err.value).splitlines() if "WISCA" in s]
        assert any(f"rescale {weight}" in s for s in sentences) and all(s.endswith(".") for s in sentences)
        return
    cfg = validate(cfg)
    if wisca == "qk_vo_tensor_init":
        _check_init_transition(cfg)
    else:
        _check_periodic_transition(cfg)


@pytest.mark.parametrize("pc", PC_OPTIONS)
@pytest.mark.parametrize("wisca", WISCA_OPTIONS)
def test_every_accepted_combination_preserves_the_logits_and_the_rest_are_refused(wisca, pc):
    """WISCA option x PC option, each on two of the six gate x GQA variants, rotated so every WISCA option
    and every PC option meets all six (the full product is the slow test below)."""
    base = _compose(wisca, pc)
    i = (list(WISCA_OPTIONS).index(wisca) + list(PC_OPTIONS).index(pc)) % 3
    for gate, kv in (VARIANTS[i], VARIANTS[i + 3]):
        _check_combination(base, wisca, pc, gate, kv)


@pytest.mark.slow
@pytest.mark.parametrize("pc", PC_OPTIONS)
@pytest.mark.parametrize("wisca", WISCA_OPTIONS)
def test_full_product_of_wisca_pc_gate_and_gqa(wisca, pc):
    base = _compose(wisca, pc)
    for gate, kv in VARIANTS:
        _check_combination(base, wisca, pc, gate, kv)


@pytest.mark.parametrize("pc, granularity", [("level4_no_recover", "tensor"), ("level4", "channel")])
def test_refused_combinations_really_break_the_function(pc, granularity):
    """The refusals are necessary: forcing WISCA's VO scale onto the raw PC weight changes the logits, while
    the same scale on the plain model (the control) keeps them."""
    idx = _tokens(0)
    for pc_option, exact in ((pc, False), ("none", True)):
        cfg = _compose("qk_vo_tensor", pc_option)  # not validated: the transition is forced
        model, _ = build_model(cfg, build_techniques(cfg))
        _unbalance(model, seed=3)
        refresh_all(model, 10)
        with torch.no_grad():
            before = model(idx)
            for layer in model.layers:
                attn = layer.attn
                t = 2.0 if granularity == "tensor" else torch.linspace(0.3, 3.0, attn.v_proj.out_features)
                attn.v_proj.weight.mul_(t if granularity == "tensor" else t[:, None])
                _holder(attn.o_proj).mul_(1 / t if granularity == "tensor" else 1 / t[None, :])
            change = (model(idx) - before).abs().max().item()
        assert (change < 1e-4) if exact else (change > 1e-2), (pc_option, change)


def test_refusal_is_one_sentence_before_any_run(tmp_path):
    from lit_modules.train import run

    cfg = _compose("vo_tensor", "level4_no_recover")
    cfg.runs_dir = str(tmp_path)
    with pytest.raises(ConfigError) as err:
        run(cfg)
    (sentence,) = str(err.value).splitlines()
    assert sentence == (
        "WISCA's VO transition cannot rescale o_proj exactly: without norm recovery "
        "(techniques.pc_layer.recover_norm=false) the PC weight ignores any scale of its raw weight; "
        "set techniques.wisca.vo=false or keep o_proj out of techniques.pc_layer.targets."
    )
    assert not (tmp_path / "checkpoints").exists()


# ------------------------------------------------------------------ the default sweep space


def _categorical_walk(specs, first_only: tuple[str, ...] = ()) -> list[dict]:
    """Every combination of the space's categorical choices (respecting `when`), numbers at their low end;
    keys in `first_only` take their first choice only."""
    combos: list[dict] = [{}]
    for spec in specs:
        grown = []
        for sampled in combos:
            active = all(sampled.get(dep) in allowed for dep, allowed in (spec.when or {}).items())
            if not active:
                grown.append(sampled)
            elif spec.type == "categorical":
                choices = spec.choices[:1] if spec.key in first_only else spec.choices
                grown += [{**sampled, spec.key: choice} for choice in choices]
            else:
                grown.append({**sampled, spec.key: spec.low})
        combos = grown
    return combos


def _walk_default_space(first_only: tuple[str, ...]) -> None:
    """Each combination validates, and each one with WISCA keeps the model's function through a transition
    on the real built model (the exactness depends on the model and the technique stack, not the period)."""
    from omegaconf import OmegaConf

    from sweeps.space import as_overrides
    from sweeps.sweep_config import load_sweep_config

    sweep_cfg, specs = load_sweep_config("default", [])
    combos = _categorical_walk(specs, first_only)
    assert any(c.get("wisca") and c.get("pc_layer") for c in combos)
    composed: dict[tuple, DictConfig] = {}  # Hydra composes the group choices; values are set on a copy
    with_wisca = 0
    for sampled in combos:
        groups = tuple((k, v) for k, v in sampled.items() if "." not in k)
        if groups not in composed:
            composed[groups] = compose_run_config([*sweep_cfg.overrides, *as_overrides(dict(groups))])
        cfg = copy.deepcopy(composed[groups])
        for key, value in sampled.items():
            if "." in key:
                OmegaConf.update(cfg, key, value, force_add=False)
        cfg = validate(cfg)
        if cfg.techniques.get("wisca") is not None and sampled["techniques.wisca.every_n_steps"] == 50:
            cfg.techniques.wisca.opt_state = "rescale"
            _check_periodic_transition(cfg)
            with_wisca += 1
    assert with_wisca >= 16


def test_default_sweep_space_never_draws_a_refused_or_inexact_combination():
    """Walk the default `make sweep` space: every combination of its model and technique choices (the
    WISCA period at its first choice; the slow test below walks every period too)."""
    _walk_default_space(first_only=("techniques.wisca.every_n_steps",))


@pytest.mark.slow
def test_every_categorical_combination_of_the_default_sweep_space():
    _walk_default_space(first_only=())

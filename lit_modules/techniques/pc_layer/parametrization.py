"""The PC layer as a `torch.nn.utils.parametrize` parametrization of a Linear weight.

For a raw weight W (out x in) the effective weight is, exactly as in the official `PCLinear`:

    sigma = u^T W v + eps              u, v: persistent fp32 buffers (streaming power iteration);
                                       WITH autograd through W (u, v are constants), like spectral_norm
    Wn    = W / sigma                  top singular value ~ 1
    W_pc  = p(Wn)                      odd polynomial of the level (Gram of the smaller side)
    W_pc  = W_pc * sg(sigma)           norm recovery, stop-gradient     (recover_norm)
    W_pc  = W_pc * gamma               one learnable scalar, init 1      (learnable_gamma)

With parametrize the raw W lives at `<linear>.parametrizations.weight.original` and this module (with
`u`, `v` and `gamma`) at `<linear>.parametrizations.weight.0`, so parameter names keep the module
path (`layers.0.mlp.up_proj.parametrizations.weight.0.gamma`) and the optimizer's family tagger still
files them under their module's family. `<linear>.weight` returns the effective weight.

u and v are refreshed outside the forward pass (`refresh`, called after every optimizer step by
`refresh.PowerIterationRefresh`), warm-started from their previous values.
"""

from __future__ import annotations

import zlib

import torch
from torch import nn
from torch.nn.utils import parametrize

from lit_modules.techniques.pc_layer.polynomials import coefficients, odd_matrix_polynomial


class PCParametrization(nn.Module):
    def __init__(
        self,
        shape: tuple[int, int],
        level: int = 4,
        recover_norm: bool = True,
        learnable_gamma: bool = True,
        eps: float = 1e-7,
        seed: int = 0,
    ):
        super().__init__()
        coefficients(level)  # fail early on a level outside the table
        self.level = level
        self.recover_norm = recover_norm
        self.eps = eps
        self.seed = seed  # for (re-)initializing u, v without touching the global RNG
        out_features, in_features = shape
        self.register_buffer("u", torch.zeros(out_features, dtype=torch.float32))
        self.register_buffer("v", torch.zeros(in_features, dtype=torch.float32))
        self._random_init(out_features, in_features)
        if learnable_gamma:
            self.gamma = nn.Parameter(torch.ones(1))  # shape (1,) as in the official LearnableGamma
        else:
            self.register_parameter("gamma", None)

    # --- forward --------------------------------------------------------------------------------

    def sigma(self, weight: torch.Tensor) -> torch.Tensor:
        """u^T W v + eps, differentiable in W; u, v are cast to the weight's dtype (fp32 at rest)."""
        u = self.u.to(device=weight.device, dtype=weight.dtype)
        v = self.v.to(device=weight.device, dtype=weight.dtype)
        return torch.dot(u, torch.mv(weight, v)) + self.eps

    def preconditioned(self, weight: torch.Tensor) -> torch.Tensor:
        """sg(sigma) * p(W / sigma) (or p(W / sigma) without recovery): the post-PC weight, no gamma."""
        sigma = self.sigma(weight)
        w_pc = odd_matrix_polynomial(weight / sigma, self.level)
        if self.recover_norm:
            w_pc = w_pc * sigma.detach()
        return w_pc

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        w_pc = self.preconditioned(weight)
        if self.gamma is not None:
            w_pc = w_pc * self.gamma.to(dtype=w_pc.dtype)
        return w_pc

    # --- streaming power iteration --------------------------------------------------------------

    def _random_init(self, out_features: int, in_features: int) -> None:
        generator = torch.Generator().manual_seed(self.seed)
        for name, size in (("u", out_features), ("v", in_features)):
            vec = torch.randn(size, generator=generator, dtype=torch.float32)
            current = getattr(self, name)
            vec = (vec / (vec.norm() + self.eps)).to(current.device)
            if current.shape == vec.shape:
                with torch.no_grad():
                    current.copy_(vec)
            else:
                setattr(self, name, vec)  # a registered buffer name: replaces the buffer

    def state_is_valid(self, weight: torch.Tensor) -> bool:
        """False when u, v have the wrong size, a NaN/Inf, or zero norm (e.g. after meta materialization)."""
        out_features, in_features = weight.shape
        if self.u.shape != (out_features,) or self.v.shape != (in_features,):
            return False
        return bool(
            torch.isfinite(self.u).all()
            and torch.isfinite(self.v).all()
            and self.u.norm() > 0
            and self.v.norm() > 0
        )

    @property
    def working_dtype(self) -> torch.dtype:
        """The power iteration's dtype: the buffers' float64, else float32 (never below fp32)."""
        return torch.float64 if self.u.dtype == torch.float64 else torch.float32

    @torch.no_grad()
    def refresh(self, weight: torch.Tensor, iters: int) -> None:
        """`iters` power-iteration steps on the raw weight, in fp32, warm-started from u, v.

        v <- normalize(W^T u), then u <- normalize(W v), as in the official `update_sn_state`.
        """
        if not self.state_is_valid(weight):
            self._random_init(*weight.shape)
        dtype = self.working_dtype
        w = weight.detach().to(dtype=dtype, device=self.u.device)
        u, v = self.u.to(dtype), self.v.to(dtype)
        for _ in range(iters):
            v = _unit(torch.mv(w.mT, u), self.eps)
            u = _unit(torch.mv(w, v), self.eps)
        self.u.copy_(u)
        self.v.copy_(v)

    # --- what an outside rescale of the raw weight does (WISCA's transitions) ------------------------

    def scaling_problem(self, kind: str) -> str | None:
        """Why scaling the raw weight by a positive factor of `kind` ("tensor", "rows" or "columns") does
        not scale this map's output by the same factor, or None when it does.

        With norm recovery the map is positively homogeneous of degree 1: for c > 0,
        sigma(cW) = c u^T W v + eps = c sigma(W) (up to eps, ~1e-7 of a refreshed sigma), so
        p(cW / sigma(cW)) = p(W / sigma(W)) and the recovered sg(sigma) carries c. u and v are directions,
        which the power iteration finds unchanged on cW, and the stop-gradient only affects the backward.
        Without recovery p(W / sigma) ignores the scale. A per-row or per-column factor D commutes with the
        odd polynomial only at level 0 (p is the identity): p(D X) != D p(X) for any higher level.
        """
        if not self.recover_norm:
            return (
                "without norm recovery (techniques.pc_layer.recover_norm=false) the PC weight ignores any scale of "
                "its raw weight"
            )
        if kind != "tensor" and len(coefficients(self.level)) > 1:
            per = "row" if kind == "rows" else "column"
            return f"the level-{self.level} PC polynomial does not commute with a per-{per} scale"
        return None

    def extra_repr(self) -> str:
        gamma = self.gamma is not None
        return f"level={self.level}, recover_norm={self.recover_norm}, gamma={gamma}, eps={self.eps}"


def _unit(vec: torch.Tensor, eps: float) -> torch.Tensor:
    return vec / (vec.norm() + eps)  # the official normalization (eps in the denominator)


# --- attaching and finding ------------------------------------------------------------------------


def seed_for(module_path: str) -> int:
    """A stable per-module seed for u, v, so building the same model twice gives the same buffers."""
    return zlib.crc32(module_path.encode())


def attach_pc(linear: nn.Linear, module_path: str, **knobs) -> PCParametrization:
    """Register a PC parametrization on `linear.weight` and return it."""
    if pc_of(linear) is not None:
        raise ValueError(f"{module_path} already has a PC parametrization.")
    pc = PCParametrization(tuple(linear.weight.shape), seed=seed_for(module_path), **knobs)
    pc.to(device=linear.weight.device)
    if pc.gamma is not None:
        pc.gamma.data = pc.gamma.data.to(dtype=linear.weight.dtype)
    parametrize.register_parametrization(linear, "weight", pc)
    return pc


def pc_of(module: nn.Module) -> PCParametrization | None:
    """The module's PC parametrization of `weight`, or None."""
    if not parametrize.is_parametrized(module, "weight"):
        return None
    for p in module.parametrizations.weight:
        if isinstance(p, PCParametrization):
            return p
    return None


def raw_weight(module: nn.Module) -> torch.Tensor:
    """The trainable tensor behind a parametrized weight (what the optimizer updates)."""
    return module.parametrizations.weight.original


def pc_modules(model: nn.Module) -> list[tuple[str, nn.Module, PCParametrization]]:
    """(module path, Linear, parametrization) for every PC-parametrized weight in `model`."""
    found = []
    for name, module in model.named_modules():
        pc = pc_of(module)
        if pc is not None:
            found.append((name, module, pc))
    return found


@torch.no_grad()
def refresh_all(model: nn.Module, iters: int, only_invalid: bool = False) -> int:
    """Refresh u, v of every PC layer in `model` (or only repair invalid ones); returns how many ran.

    The same arithmetic as `PCParametrization.refresh` on each layer, op for op, but the layers step
    together: on CPU each normalization is one `torch._foreach_*` call over all of them instead of three
    calls per layer (the very same per-tensor kernels, so the buffers come out bit-identical; a test
    checks it). Validity is screened with one norm per buffer: a finite, non-zero norm means finite
    entries and a non-zero vector; anything else gets the exact per-layer check.
    """
    found = pc_modules(model)
    layers = [(pc, raw_weight(module)) for _, module, pc in found]
    if not layers:
        return 0
    suspects = _invalid_suspects(layers)
    if only_invalid:
        layers = [(pc, w) for i, (pc, w) in enumerate(layers) if i in suspects and not pc.state_is_valid(w)]
        for pc, weight in layers:
            pc.refresh(weight, iters)
        return len(layers)
    for i in sorted(suspects):
        pc, weight = layers[i]
        if not pc.state_is_valid(weight):
            pc._random_init(*weight.shape)
    groups: dict[tuple, list[tuple[PCParametrization, torch.Tensor]]] = {}
    for pc, weight in layers:  # one group per (eps, working dtype, device): the foreach calls need one each
        groups.setdefault((pc.eps, pc.working_dtype, pc.u.device), []).append((pc, weight))
    for (eps, dtype, device), members in groups.items():
        ws = [w.detach().to(dtype=dtype, device=device) for _, w in members]
        wts = [w.mT for w in ws]  # the same transposed views the per-layer loop makes on every iteration
        us = [pc.u.to(dtype) for pc, _ in members]
        vs = [pc.v.to(dtype) for pc, _ in members]
        for _ in range(iters):
            vs = _units([torch.mv(wt, u) for wt, u in zip(wts, us)], eps)
            us = _units([torch.mv(w, v) for w, v in zip(ws, vs)], eps)
        torch._foreach_copy_([pc.u for pc, _ in members], us)
        torch._foreach_copy_([pc.v for pc, _ in members], vs)
    return len(layers)


def _units(vecs: list[torch.Tensor], eps: float) -> list[torch.Tensor]:
    """[_unit(v, eps) for v in vecs]: in three calls on CPU, where foreach ops loop over the same
    per-tensor kernels; elsewhere (CUDA's fused foreach norm reduces in another order) one by one."""
    if vecs[0].device.type != "cpu":
        return [_unit(vec, eps) for vec in vecs]
    norms = torch._foreach_norm(vecs)
    torch._foreach_add_(norms, eps)
    return torch._foreach_div(vecs, norms)


def _invalid_suspects(layers: list[tuple[PCParametrization, torch.Tensor]]) -> set[int]:
    """Indices of layers whose u or v might be invalid: wrong shape, or a norm that is not finite and > 0."""
    suspects = {i for i, (pc, w) in enumerate(layers) if pc.u.shape != w.shape[:1] or pc.v.shape != w.shape[1:]}
    shaped = [i for i in range(len(layers)) if i not in suspects]
    if shaped:
        buffers = [t for i in shaped for t in (layers[i][0].u, layers[i][0].v)]
        norms = torch._foreach_norm(buffers)
        if len({n.dtype for n in norms}) > 1:  # fp32 for one stack: an overflow or underflow only makes a suspect
            norms = [n.float() for n in norms]
        norms = torch.stack(norms)
        good = (torch.isfinite(norms) & (norms > 0)).view(-1, 2).all(dim=1).tolist()
        suspects.update(i for i, ok in zip(shaped, good) if not ok)
    return suspects


__all__ = ["PCParametrization", "attach_pc", "pc_modules", "pc_of", "raw_weight", "refresh_all", "seed_for"]

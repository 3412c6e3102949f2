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

u and v are refreshed outside the forward pass (`refresh_all`, called after every optimizer step by
`refresh.PowerIterationRefresh`), warm-started from their previous values.

The math is `stacked.py`'s, on a stack of weights of one shape: `refresh_all` runs one power iteration per shape
group, and in a model's forward `groups.batch_by_shape` computes a group's effective weights together and hands
this module its slice (`stacked_weight`); alone (outside that forward) a weight is a stack of one.
"""

from __future__ import annotations

import zlib

import torch
from torch import nn
from torch.nn.utils import parametrize

from lit_modules.techniques.pc_layer.polynomials import coefficients
from lit_modules.techniques.pc_layer.stacked import (is_flipped, stacked_effective, stacked_power_iteration,
                                                     stacked_sigma)


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
        # This weight's slice of its shape group's effective weights, set by the forward pre-hook of a model
        # batched by shape (`groups.ShapeBatches`), and the inputs' versions it was computed at once that forward
        # has ended (None during it). Plain attributes: not in the state dict.
        self.stacked_weight: torch.Tensor | None = None
        self.stacked_versions: tuple | None = None

    # --- forward --------------------------------------------------------------------------------

    def sigma(self, weight: torch.Tensor) -> torch.Tensor:
        """u^T W v + eps (a 0-d tensor), differentiable in W; u, v cast to the weight's dtype (fp32 at rest)."""
        return stacked_sigma(weight.unsqueeze(0), self.u.unsqueeze(0), self.v.unsqueeze(0), self.eps).reshape(())

    def preconditioned(self, weight: torch.Tensor) -> torch.Tensor:
        """sg(sigma) * p(W / sigma) (or p(W / sigma) without recovery): the post-PC weight, no gamma."""
        return self._alone(weight, None)

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        stacked, versions = self.stacked_weight, self.stacked_versions  # set by the model's forward pre-hook
        if stacked is not None and (versions is None or versions == self.versions(weight)):
            return stacked
        return self._alone(weight, None if self.gamma is None else self.gamma.view(1, 1))

    def versions(self, weight: torch.Tensor) -> tuple:
        """What the effective weight is computed from, as it is now: the tensors' version counters (an in-place
        change moves one) and storages (a move to another device or dtype replaces one)."""
        parts = (weight, self.u, self.v) + (() if self.gamma is None else (self.gamma,))
        return tuple((t._version, t.data_ptr()) for t in parts)

    def release(self) -> None:
        """Drop the shape group's slice (its inputs are about to change, or its backward is done)."""
        self.stacked_weight = None

    def _alone(self, weight: torch.Tensor, gamma: torch.Tensor | None) -> torch.Tensor:
        """This weight as a stack of one: the same code as its shape group's."""
        return stacked_effective(weight.unsqueeze(0), self.u.unsqueeze(0), self.v.unsqueeze(0), gamma, self.level,
                                 self.eps, self.recover_norm).squeeze(0)

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
        w = weight.detach().to(dtype=self.working_dtype, device=self.u.device)
        u, v = stacked_power_iteration(w.unsqueeze(0), self.u.unsqueeze(0), self.v.unsqueeze(0), iters, self.eps)
        self.u.copy_(u.squeeze(0))
        self.v.copy_(v.squeeze(0))

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
def refresh_all(model: nn.Module, iters: int, only_invalid: bool = False, repair: bool = True) -> int:
    """Refresh u, v of every PC layer in `model` (or only repair invalid ones); returns how many ran.

    The layers are grouped by shape up to transposition (and working dtype, device, eps) and each group runs
    one batched power iteration (`stacked.stacked_power_iteration`), the same arithmetic as
    `PCParametrization.refresh` on each layer up to float32 rounding; the new u, v are written back in one
    foreach copy. With `repair`, buffers that are invalid (wrong size, NaN/Inf, zero: a bad checkpoint, meta
    materialization) are re-initialized first, screened with one norm per buffer (this reads values on the
    host, so the per-step refresh passes repair=False: nothing during training makes a valid buffer invalid).
    """
    layers = [(pc, raw_weight(module)) for _, module, pc in pc_modules(model)]
    if not layers:
        return 0
    for pc, _ in layers:
        pc.release()  # the new u, v make the last forward's effective weights stale
    if only_invalid or repair:
        suspects = _invalid_suspects(layers)
        invalid = [i for i in sorted(suspects) if not layers[i][0].state_is_valid(layers[i][1])]
        if only_invalid:
            for i in invalid:
                layers[i][0].refresh(layers[i][1], iters)
            return len(invalid)
        for i in invalid:
            layers[i][0]._random_init(*layers[i][1].shape)
    groups: dict[tuple, list[tuple[PCParametrization, torch.Tensor]]] = {}
    for pc, weight in sorted(layers, key=lambda layer: is_flipped(layer[1].shape)):  # wide ones last
        key = (tuple(sorted(weight.shape, reverse=True)), pc.working_dtype, pc.u.device, pc.eps)
        groups.setdefault(key, []).append((pc, weight))
    targets: list[torch.Tensor] = []
    values: list[torch.Tensor] = []
    for (_, dtype, device, eps), members in groups.items():
        flipped = [is_flipped(weight.shape) for _, weight in members]
        w = torch.stack([weight.mT if f else weight for (_, weight), f in zip(members, flipped)])
        if w.dtype != dtype or w.device != device:
            w = w.to(dtype=dtype, device=device)
        left = torch.stack([pc.v if f else pc.u for (pc, _), f in zip(members, flipped)])  # w's u
        right = torch.stack([pc.u if f else pc.v for (pc, _), f in zip(members, flipped)])
        left, right = stacked_power_iteration(w, left, right, iters, eps, flipped=sum(flipped))
        targets += [pc.v if f else pc.u for (pc, _), f in zip(members, flipped)]
        targets += [pc.u if f else pc.v for (pc, _), f in zip(members, flipped)]
        values += [*left.unbind(0), *right.unbind(0)]
    torch._foreach_copy_(targets, values)
    return len(layers)


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

"""A rung: one model size of a trend family, named by the arm's trailing variant.

    rung_of("g8_origin@tpp1.3@l6")        # 'l6': a rung of the ladder declaration (conf/ladder/cpu.yaml)
    trend_family("g8_origin@tpp1.3@l6")   # 'g8_origin@tpp1.3': the condition the size varies under
    ladder_rung("l6").params_non_embedding    # 720,096 (6 layers, d_model 96), counted from the declaration
    model_shape("tiny_x4")                # (2, 128): the layers and width its model option declares

Two namings. `@x<factor>` (`@x4`, `@x0.25`): the 2-layer `tiny_*` rungs, sized by what their reference's runs
logged; the arm without a variant is that family's base size. `@l<depth>` (`@l2` ... `@l6`, any rung the ladder
declares): sized by the ladder's declaration, the plain rung's non-embedding count, the very count its TPP
budget is drawn on (`ladder_tokens`). Other variants (`@lr3e-3`, `@tpp1.3`, `@l5` off the ladder) are no size.
The ladder is read from its YAML (lit_modules.config.ladder); the model itself is never imported here.
"""

from __future__ import annotations

import math
import re

from lit_modules.config import files
from lit_modules.config.ladder import Rung, load_ladder

FACTOR_RUNG = re.compile(r"x\d+(?:\.\d+)?")
SEP = "@"


def ladder_rung(name: str) -> Rung | None:
    """The ladder's rung of that name, or None for any other variant."""
    return next((r for r in load_ladder().rungs if r.name == name), None)


def rung_of(arm: str) -> str:
    """The arm's trailing size variant (`x4`, `l6`), or '' where its last variant (or none) is not a size."""
    head, sep, last = str(arm).rpartition(SEP)
    if not sep or not head:
        return ""
    return last if FACTOR_RUNG.fullmatch(last) or ladder_rung(last) is not None else ""


def trend_family(arm: str) -> str:
    """The arm without its trailing size variant: `g8_qk_vo_tensor@tpp1.3@x4` -> `g8_qk_vo_tensor@tpp1.3`."""
    rung = rung_of(arm)
    return str(arm)[: -len(rung) - 1] if rung else str(arm)


def is_ladder_arm(arm: str) -> bool:
    """Whether the arm's size variant is a rung of the ladder (`@l<depth>`)."""
    return ladder_rung(rung_of(arm)) is not None


def model_shape(model: str) -> tuple[float, float]:
    """(n_layers, d_model) of a model a run logged by name: a ladder rung's, else its conf/model option's as that
    file declares it now; NaNs for a name neither knows (the export keeps the name, not the shape)."""
    rung = ladder_rung(model)
    if rung is not None:
        return float(rung.n_layers), float(rung.d_model)
    if not model or not files.has_option("model", model):
        return math.nan, math.nan
    node = files.load_option("model", model)
    return float(node.get("n_layers", math.nan)), float(node.get("d_model", math.nan))

"""z-loss's one setting: the coefficient of the auxiliary term (PaLM's value by default)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from lit_modules.typed_settings import Bound

PAPER_COEF = 1e-4


@dataclass
class ZLossSettings:
    coef: Annotated[float, Bound(ge=0)] = PAPER_COEF  # 0 trains exactly as the baseline

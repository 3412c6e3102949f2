"""The `init` config group: which initialization rule, its scales and knobs (lit_modules/model/init.py
applies it). Plain data, no torch: the config schema imports it before any heavy import."""

from dataclasses import dataclass
from typing import Optional

INIT_RULES = ("fixed", "fan_in_power", "depth_scaled")
EMB_RULES = ("same_rule", "fixed", "none")
HEAD_RULES = ("same_rule", "d_model_rsqrt")
# Fields added after runs were recorded, at the value that changes nothing (see model/config.py).
ADDED_DEFAULTS = {"router_std": None, "stream": 0}
STREAM_STRIDE = 1_000_003  # init.stream k draws from seed + k x this: far from any other run's seed


@dataclass
class InitConfig:
    rule: str = "fixed"  # "fixed" | "fan_in_power" | "depth_scaled"
    std: float = 0.02
    gamma: float = 0.5  # only for fan_in_power
    emb: str = "same_rule"  # "same_rule" | "fixed" | "none"
    emb_std: float = 0.02  # only for emb == "fixed"
    head: str = "same_rule"  # "same_rule" | "d_model_rsqrt"
    router_std: Optional[float] = None  # MoE router: None = the block rule (fan-in d_model); 0 = zeros (uniform)
    # Another draw of the initial weights with everything else kept, the data order included: a null control
    # (an arm that differs from its reference only in a nuisance) is `init.stream=1`.
    stream: int = 0

    def generator_seed(self, seed: int) -> int:
        """The seed of the initialization's generator for a run seeded `seed` (stream 0: the run seed itself)."""
        return seed + STREAM_STRIDE * self.stream

    def problems(self) -> list[str]:
        """Human-readable reasons this init config is unusable (empty = fine)."""
        out: list[str] = []
        if self.rule not in INIT_RULES:
            out.append(f"rule must be one of {INIT_RULES}, got {self.rule!r}.")
        if self.emb not in EMB_RULES:
            out.append(f"emb must be one of {EMB_RULES}, got {self.emb!r}.")
        if self.head not in HEAD_RULES:
            out.append(f"head must be one of {HEAD_RULES}, got {self.head!r}.")
        if not self.std > 0:
            out.append(f"std must be positive, got {self.std}.")
        if not self.emb_std > 0:
            out.append(f"emb_std must be positive, got {self.emb_std}.")
        if not self.gamma >= 0:
            out.append(f"gamma must be >= 0, got {self.gamma}.")
        if self.stream < 0:
            out.append(f"stream must be >= 0 (0 = the run seed's own draw), got {self.stream}.")
        if self.router_std is not None and not self.router_std >= 0:
            out.append(f"router_std must be >= 0 (0 = zeros) or null, got {self.router_std}.")
        return out

    def tags(self, tie_embeddings: bool = False) -> dict[str, str]:
        """Run tags for the embedding and head rules (see the module docstring).

        papers.md leaves which matrices get d_in ** -gamma UNCONFIRMED and marks the default (the rule with
        d_in = d_model for both) as an assumption; the other readings are no better confirmed, so the
        fidelity tag is `assumed` whichever is chosen, and `init.emb`/`init.head` record the choice. With
        tied embeddings the head is the embedding matrix and follows `emb`.
        """
        return {
            "init.emb": self.emb,
            "init.head": "tied" if tie_embeddings else self.head,
            "fidelity.init.emb": "assumed",
            "fidelity.init.head": "assumed",
        }

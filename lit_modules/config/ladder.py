"""The model ladder: rungs that grow depth and width together, all made by one rule from one declaration.

    make train ARGS="model=ladder/l6"                       # a rung is a model preset like model=tiny
    regime: {name: tokens, tokens: '${ladder_tokens:${model.name},20}'}   # 20 x the plain rung's parameters

The declaration is `conf/ladder/<ladder>.yaml` (`cpu`, the one the evidence protocols use): each rung's name
and depth, and the rule that sizes the rest from the depth, n_heads = n_layers, d_model = head_dim x n_heads,
d_ff = ffn_ratio x d_model. The rungs are registered as Hydra options `model=ladder/<rung>` (Hydra's config
store, filled before every composition by `register_schema`), so no model file is copied per rung, and an
arm at a rung is the arm plus the rung's size: `+arm=<arm> model=ladder/<rung>` (`arm_at_rung`).

`ladder_tokens` (an OmegaConf resolver) is the token budget of a rung at a tokens-per-parameter rate, counted
on the plain rung: an arm that adds weights (a gate) trains on the same tokens as its reference there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from lit_modules.config import files
from lit_modules.config.errors import ConfigError

if TYPE_CHECKING:  # the schema registers the rungs at every composition, the analysis side too: no model import
    from lit_modules.model.config import LlamaConfig

GROUP = "ladder"
DEFAULT_LADDER = "cpu"
MODEL_GROUP = "model/ladder"  # model=ladder/<rung>


@dataclass(frozen=True)
class Rung:
    name: str
    n_layers: int
    d_model: int
    n_heads: int
    d_ff: int
    max_seq_len: int

    @property
    def params_non_embedding(self) -> int:
        """Per block q, k, v, o (4 d^2), SwiGLU gate/up/down (3 d d_ff) and two RMSNorm weights (2 d); then the
        final norm (d). The embedding and the head are left out, as every TPP budget here counts."""
        d = self.d_model
        return self.n_layers * (4 * d * d + 3 * d * self.d_ff + 2 * d) + d

    def tokens(self, tokens_per_param: float) -> int:
        return int(tokens_per_param * self.params_non_embedding)

    def model_config(self) -> LlamaConfig:
        from lit_modules.model.config import LlamaConfig

        return LlamaConfig(name=self.name, d_model=self.d_model, n_layers=self.n_layers, n_heads=self.n_heads,
                           d_ff=self.d_ff, max_seq_len=self.max_seq_len)


@dataclass(frozen=True)
class Ladder:
    name: str
    rungs: tuple[Rung, ...]  # smallest first
    headline: str

    def rung(self, name: str) -> Rung:
        for rung in self.rungs:
            if rung.name == name:
                return rung
        known = ", ".join(r.name for r in self.rungs)
        raise ConfigError(f"There is no rung '{name}' on the {self.name} ladder (known: {known}).")

    @property
    def span(self) -> float:
        """Largest over smallest non-embedding parameter count."""
        return self.rungs[-1].params_non_embedding / self.rungs[0].params_non_embedding


def make_rung(name: str, n_layers: int, head_dim: int, ffn_ratio: int, max_seq_len: int) -> Rung:
    """The rule: every size of a rung follows from its depth."""
    d_model = head_dim * n_layers
    return Rung(name, n_layers, d_model, n_layers, ffn_ratio * d_model, max_seq_len)


@lru_cache(maxsize=None)
def load_ladder(name: str = DEFAULT_LADDER) -> Ladder:
    """`conf/ladder/<name>.yaml` made into rungs; ConfigError (one sentence) when it is missing or malformed."""
    if not files.has_option(GROUP, name):
        raise ConfigError(files.missing_option_sentence(GROUP, name, "ladder"))
    raw = files.load_option(GROUP, name)
    try:
        head_dim, ffn_ratio, seq = int(raw.head_dim), int(raw.ffn_ratio), int(raw.max_seq_len)
        depths = {str(k): int(v) for k, v in raw.depths.items()}
        headline = str(raw.headline)
    except Exception as err:  # noqa: BLE001 - any missing or non-integer key: one sentence
        raise ConfigError(f"conf/{GROUP}/{name}.yaml needs integer head_dim, ffn_ratio, max_seq_len, "
                          f"a depths mapping and a headline ({type(err).__name__}: {err}).") from None
    if head_dim < 2 or head_dim % 2 or ffn_ratio < 1 or not depths or min(depths.values()) < 1:
        raise ConfigError(f"conf/{GROUP}/{name}.yaml: head_dim must be even and at least 2 (RoPE pairs), "
                          "ffn_ratio at least 1 and every depth at least 1.")
    rungs = sorted((make_rung(k, v, head_dim, ffn_ratio, seq) for k, v in depths.items()),
                   key=lambda r: r.params_non_embedding)
    ladder = Ladder(name, tuple(rungs), headline)
    ladder.rung(headline)  # the headline must be one of the rungs
    return ladder


def ladder_tokens(rung: str, tokens_per_param: float) -> int:
    """Resolver `${ladder_tokens:<rung>,<tpp>}`: tokens for `tpp` tokens per non-embedding parameter of the
    plain rung (the cpu ladder), or of the plain model option of that name (`model=llama_271m`, which a GPU recipe
    sets over a protocol's rung): an arm that sets its own budget this way keeps its ratio at any size."""
    ladder = load_ladder()
    if str(rung) in {r.name for r in ladder.rungs} or not files.has_option("model", str(rung)):
        return ladder.rung(str(rung)).tokens(float(tokens_per_param))
    return int(float(tokens_per_param) * option_params_non_embedding(str(rung)))


def option_params_non_embedding(option: str) -> int:
    """Non-embedding parameters of conf/model/<option>.yaml by the rung's count (q, o full; k, v at n_kv_heads;
    SwiGLU; two norms per block and the final one), read from the file: no model is built."""
    cfg = files.load_option("model", option)
    d, heads = int(cfg.d_model), int(cfg.n_heads)
    kv = int(cfg.n_kv_heads) if cfg.get("n_kv_heads") else heads
    per_block = 2 * d * d + 2 * d * (d // heads) * kv + 3 * d * int(cfg.d_ff) + 2 * d
    return int(cfg.n_layers) * per_block + d


def register_ladder() -> None:
    """Every rung of the cpu ladder as the Hydra option `model=ladder/<rung>` (idempotent)."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for rung in load_ladder().rungs:
        store.store(group=MODEL_GROUP, name=rung.name, node=rung.model_config())


def split_rung(arm: str, ladder: Ladder | None = None) -> tuple[str, str | None]:
    """`baseline@l6` -> (`baseline`, `l6`) when the trailing variant is a rung of the ladder, else (arm, None)."""
    ladder = ladder or load_ladder()
    base, _, variant = arm.rpartition("@")
    if base and variant in {r.name for r in ladder.rungs}:
        return base, variant
    return arm, None


def arm_at_rung(arm_option: str, rung: str, arm_name: str) -> list[str]:
    """The overrides that run one arm file at a rung, named `<arm_name>@<rung>` so cells of different rungs
    are never paired: the arm plus the rung's size, no per-rung arm file."""
    load_ladder().rung(rung)  # refuses an unknown rung in one sentence
    return [f"+arm={arm_option}", f"model=ladder/{rung}", f"ablation.arm={arm_name}@{rung}"]

"""Architecture hyperparameters of the Llama-style decoder.

`LlamaConfig` doubles as an OmegaConf structured-config schema, so it only uses
int/float/str/bool/Optional fields and every field has a default.
"""

from dataclasses import dataclass
from typing import Optional

ATTN_GATES = ("none", "elementwise", "headwise")
MOE_AUX_LOADS = ("slots", "tokens")  # f_e of the balancing loss over dispatched slots or tokens (model/moe.py)

# Fields added after runs were recorded, with the value that means "not used": a config holding exactly that
# value is the model it was before the field existed, so the run's identity hash leaves it out
# (lit_modules/config/identity.py identity_of) and every recorded cell keeps its hash.
ADDED_DEFAULTS = {
    "n_experts": 0,
    "experts_top_k": 2,
    "expert_d_ff": None,
    "shared_expert": False,
    "moe_aux_coef": 0.01,
    "moe_aux_load": "slots",
}


@dataclass
class LlamaConfig:
    name: str = "custom"
    vocab_size: int = 0  # 0 = "filled in later from the tokenizer"; Llama() refuses 0
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: Optional[int] = None  # None = n_heads (plain multi-head attention)
    d_ff: int = 192  # SwiGLU hidden width
    max_seq_len: int = 256
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = False
    attn_gate: str = "none"  # "none" | "elementwise" | "headwise" (output gate after SDPA)
    # Mixture of experts in place of the SwiGLU FFN (model/moe.py); 0 experts = the dense model.
    n_experts: int = 0
    experts_top_k: int = 2  # experts each token is routed to
    expert_d_ff: Optional[int] = None  # each expert's SwiGLU width; None = d_ff
    shared_expert: bool = False  # one more SwiGLU expert every token goes through (DeepSeek-MoE style)
    moe_aux_coef: float = 0.01  # load-balancing loss coefficient (Switch Transformer); 0 = none
    # f_e of the balancing loss: "slots" = count / (tokens * k) (share of dispatched slots, Megatron-core);
    # "tokens" = count / tokens (share of tokens, Hugging Face Mixtral), k times larger (model/moe.py).
    moe_aux_load: str = "slots"

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def expert_width(self) -> int:
        return self.expert_d_ff if self.expert_d_ff is not None else self.d_ff

    @property
    def kv_heads(self) -> int:
        """Number of key/value heads with the None default resolved."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def problems(self) -> list[str]:
        """Human-readable reasons this config cannot build a model (empty = fine).

        Does not raise: the caller decides whether a problem is fatal. A
        vocab_size of 0 is *not* a problem here because it is legitimately
        filled in later; the model constructor checks it.
        """
        out: list[str] = []
        positive = {
            "d_model": self.d_model,
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "n_kv_heads": self.kv_heads,
            "d_ff": self.d_ff,
            "max_seq_len": self.max_seq_len,
        }
        for field_name, value in positive.items():
            if value <= 0:
                out.append(f"{field_name} must be positive, got {value}.")
        if self.vocab_size < 0:
            out.append(f"vocab_size must be >= 0 (0 = set from tokenizer), got {self.vocab_size}.")
        if self.rope_theta <= 0:
            out.append(f"rope_theta must be positive, got {self.rope_theta}.")
        if self.norm_eps < 0:
            out.append(f"norm_eps must be >= 0, got {self.norm_eps}.")
        if self.n_experts < 0 or self.n_experts == 1:
            out.append(f"n_experts must be 0 (dense) or at least 2, got {self.n_experts}.")
        if self.n_experts >= 2 and not 1 <= self.experts_top_k <= self.n_experts:
            out.append(f"experts_top_k must be between 1 and n_experts ({self.n_experts}), got {self.experts_top_k}.")
        if self.expert_d_ff is not None and self.expert_d_ff <= 0:
            out.append(f"expert_d_ff must be positive (or null for d_ff), got {self.expert_d_ff}.")
        if self.moe_aux_coef < 0:
            out.append(f"moe_aux_coef must be >= 0, got {self.moe_aux_coef}.")
        if self.moe_aux_load not in MOE_AUX_LOADS:
            out.append(f"moe_aux_load must be one of {MOE_AUX_LOADS}, got {self.moe_aux_load!r}.")
        if self.attn_gate not in ATTN_GATES:
            out.append(f"attn_gate must be one of {ATTN_GATES}, got {self.attn_gate!r}.")
        # Divisibility checks only make sense once the sizes are positive.
        if self.d_model > 0 and self.n_heads > 0:
            if self.d_model % self.n_heads != 0:
                out.append(
                    f"d_model ({self.d_model}) is not divisible by n_heads ({self.n_heads})."
                )
            elif self.head_dim % 2 != 0:
                out.append(
                    f"head_dim = d_model / n_heads = {self.head_dim} is odd; RoPE rotates "
                    "channel pairs and needs an even head_dim."
                )
        if self.n_heads > 0 and self.kv_heads > 0 and self.n_heads % self.kv_heads != 0:
            out.append(
                f"n_heads ({self.n_heads}) is not divisible by n_kv_heads ({self.kv_heads}); "
                "grouped-query attention needs whole groups."
            )
        return out

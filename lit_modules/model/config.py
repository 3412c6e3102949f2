"""Architecture hyperparameters of the Llama-style decoder.

`LlamaConfig` doubles as an OmegaConf structured-config schema, so it only uses
int/float/str/bool/Optional fields and every field has a default.
"""

from dataclasses import dataclass
from typing import Optional

ATTN_GATES = ("none", "elementwise", "headwise")


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

"""Per-token log-probabilities on fixed held-out windows: the raw material of token-level run comparisons.

Window i reads token_array[i*T : i*T + T] and predicts token_array[i*T + 1 : i*T + T + 1], so the windows
are the first N non-overlapping length-T windows of the array and their targets are contiguous: the saved
`tokens` equal token_array[1 : N*T + 1]. Every run on the same data, tokenizer and T scores the same tokens.

Artifact format (`token_logprobs.npz`, consumed by analysis/): `tokens` int32 [N*T], `logprobs` float32
[N*T] with logprobs[k] = log p(tokens[k] | the up to T preceding tokens of its window).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .adapter import _logits, resolve_device

ARTIFACT_NAME = "token_logprobs.npz"


@torch.inference_mode()
def compute_token_logprobs(
    model: nn.Module,
    token_array: np.ndarray,
    seq_len: int,
    n_windows: int,
    device: str | torch.device = "auto",
    batch_size: int = 16,
) -> tuple[np.ndarray, np.ndarray]:
    """(tokens int32 [N*T], logprobs float32 [N*T]); N = n_windows, or fewer when the array is shorter."""
    available = (len(token_array) - 1) // seq_len
    n = min(n_windows, available)
    if n < 1:
        raise ValueError(f"{len(token_array)} tokens are too few for one window of {seq_len} + 1")
    device = resolve_device(device) if isinstance(device, str) else device
    was_training = model.training
    model.to(device).eval()
    span = np.asarray(token_array[: n * seq_len + 1], dtype=np.int64)
    inputs = torch.from_numpy(span[:-1].reshape(n, seq_len))
    targets = torch.from_numpy(span[1:].reshape(n, seq_len))
    pieces = []
    try:
        for start in range(0, n, batch_size):
            x = inputs[start : start + batch_size].to(device)
            y = targets[start : start + batch_size].to(device)
            logprobs = F.log_softmax(_logits(model(x)).float(), dim=-1)
            pieces.append(logprobs.gather(-1, y[..., None]).squeeze(-1).cpu())
    finally:
        model.train(was_training)
    return span[1:].astype(np.int32), torch.cat(pieces).reshape(-1).numpy().astype(np.float32)


def save_token_logprobs(path: str | Path, tokens: np.ndarray, logprobs: np.ndarray) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, tokens=tokens.astype(np.int32), logprobs=logprobs.astype(np.float32))
    return path

"""Cut a token sequence into model-sized windows so every scored token is predicted exactly once.

A request is "score tokens[n_prefix:] given tokens[:n_prefix]" (n_prefix >= 1: a document-start token or a
context). The scored part is cut into chunks of at most `max_len` tokens; each chunk is predicted from the
longest context that fits, i.e. the window ending just before the chunk's last token, at most `max_len`
tokens long. Contexts longer than that are therefore **left-truncated**: the model sees only the last
`max_len` tokens before each prediction. A short request is one window whose input is tokens[:-1].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Window:
    request: int  # index of the request the window belongs to
    inputs: tuple[int, ...]  # what the model reads (length <= max_len)
    targets: tuple[int, ...]  # the tokens scored: the last len(targets) next-token predictions of `inputs`


def scoring_windows(request: int, tokens: Sequence[int], n_prefix: int, max_len: int) -> list[Window]:
    """Windows covering tokens[n_prefix:]; see the module docstring."""
    if n_prefix < 1:
        raise ValueError("scoring needs at least one conditioning token (use BOS/EOS for an empty context)")
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, not {max_len}")
    tokens = tuple(tokens)
    windows = []
    for chunk_start in range(n_prefix, len(tokens), max_len):
        chunk_end = min(chunk_start + max_len, len(tokens))
        input_start = max(0, chunk_end - 1 - max_len)
        windows.append(Window(request, tokens[input_start : chunk_end - 1], tokens[chunk_start:chunk_end]))
    return windows

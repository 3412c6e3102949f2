"""Cut a token sequence into model-sized windows so every scored token is predicted exactly once.

A request is "score tokens[n_prefix:] given tokens[:n_prefix]" (n_prefix >= 1: a document-start token or a
context). Two cuts, for lm-eval's two kinds of request:

- `scoring_windows` (rolling log-likelihood of a document, and any request that fits): the scored part is
  cut into chunks of at most `max_len` tokens; each chunk is predicted from the longest context that fits,
  i.e. the window ending just before the chunk's last token, at most `max_len` tokens long. Contexts longer
  than that are therefore **left-truncated**. A short request is one window whose input is tokens[:-1],
  exactly what lm-eval's HF model scores. A later chunk's first token sees one token, as in lm-eval's
  rolling windows.
- `continuation_windows` (log p(continuation | context), multiple choice): a continuation of at most
  `max_len` tokens is that same single window. A longer one, which lm-eval's HF model refuses, would leave
  its first tokens with no context at all under the chunked cut; instead every continuation token is
  predicted from at least `max_len - 1` tokens before it (context, then earlier continuation tokens), or
  from all of them near the start of the sequence: windows of `max_len` inputs that score their last two
  predictions. That costs about len(continuation) / 2 windows, for the rare requests that need it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Window:
    request: int  # index of the request the window belongs to
    inputs: tuple[int, ...]  # what the model reads (length <= max_len)
    targets: tuple[int, ...]  # the tokens scored: the last len(targets) next-token predictions of `inputs`


def _check(n_prefix: int, max_len: int) -> None:
    if n_prefix < 1:
        raise ValueError("scoring needs at least one conditioning token (use BOS/EOS for an empty context)")
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, not {max_len}")


def scoring_windows(request: int, tokens: Sequence[int], n_prefix: int, max_len: int) -> list[Window]:
    """Disjoint windows covering tokens[n_prefix:]; see the module docstring."""
    _check(n_prefix, max_len)
    tokens = tuple(tokens)
    windows = []
    for chunk_start in range(n_prefix, len(tokens), max_len):
        chunk_end = min(chunk_start + max_len, len(tokens))
        input_start = max(0, chunk_end - 1 - max_len)
        windows.append(Window(request, tokens[input_start : chunk_end - 1], tokens[chunk_start:chunk_end]))
    return windows


def is_long_continuation(n_tokens: int, n_prefix: int, max_len: int) -> bool:
    """More continuation tokens than one window scores: lm-eval's HF model refuses such a request."""
    return n_tokens - n_prefix > max_len


def continuation_windows(request: int, tokens: Sequence[int], n_prefix: int, max_len: int) -> list[Window]:
    """Windows covering tokens[n_prefix:] so that each is predicted with its full context; see the module
    docstring. Requests that fit are cut exactly as `scoring_windows` cuts them."""
    _check(n_prefix, max_len)
    tokens = tuple(tokens)
    if not is_long_continuation(len(tokens), n_prefix, max_len) or max_len < 2:
        return scoring_windows(request, tokens, n_prefix, max_len)
    windows, first = [], n_prefix
    if first <= max_len:  # the whole sequence up to position max_len fits: one window from its start
        windows.append(Window(request, tokens[:max_len], tokens[first : max_len + 1]))
        first = max_len + 1
    for target in range(first, len(tokens), 2):  # position `last` sees max_len tokens, `last - 1` one less
        last = min(target + 1, len(tokens) - 1)
        windows.append(Window(request, tokens[last - max_len : last], tokens[target : last + 1]))
    return windows

"""Build the offline task items from held-out documents only, deterministically from a seed.

- cloze (LAMBADA-style): a passage ending just before a sentence-final word; choose that word among it and
  distractors that end other sentences of the same held-out text, drawn by frequency (so length is no cue)
  and with the same capitalisation (so case is no cue).
- nextsent: a passage ending at a sentence boundary; choose the sentence that follows among it and other
  held-out sentences of similar shape, at most MAX_CHOICE_CHARS long.
- ppl: held-out passages scored whole (rolling log-likelihood -> bits per byte, byte and word perplexity).

Items keep where they came from (`doc`, `offset`), so a sample can be traced back to the text.
Every builder takes documents, never a path: the caller passes the held-out split and nothing else.
"""

from __future__ import annotations

import random
from typing import Sequence

from .local_text import context_before, final_word_spans, passage_spans, sentence_spans

BUILDER_VERSION = 4  # bump when any rule below changes: cached task files are rebuilt
# A choice is scored after its context in the training window, cut from the left to fit (as lm-eval's HF
# model does). The smallest window scored here is 128 tokens (tiny's seq_len, byte tokens): a choice of at
# most 64 bytes leaves every choice at least 64 tokens of context. With 200-character sentences, 264 of the
# 300 next-sentence items of the embedded corpus had a choice that left less, 7 only one token.
SMALLEST_WINDOW = 128
MAX_CHOICE_CHARS = SMALLEST_WINDOW // 2


def _rng(seed: int, kind: str) -> random.Random:
    return random.Random(f"{seed}:{kind}")  # string seeds are hashed with SHA-512: stable across processes


def _pick(candidates: list, n_items: int, rng: random.Random) -> list:
    """A seeded sample of at most `n_items`, returned in text order."""
    if len(candidates) <= n_items:
        return list(candidates)
    chosen = sorted(rng.sample(range(len(candidates)), n_items))
    return [candidates[i] for i in chosen]


def _has_context(text: str, offset: int, context_chars: int, min_context_chars: int) -> bool:
    """The context an item at `offset` would get holds at least `min_context_chars` non-blank characters.

    Not `offset >= min_context_chars`: the context starts at a line start when one is in range, so a long
    line before `offset` (a stage direction, a paragraph) can leave it empty or a lone newline."""
    return len(context_before(text, offset, context_chars).strip()) >= min_context_chars


def _choices(true: str, pool: list[str], n_choices: int, rng: random.Random) -> tuple[list[str], int]:
    """`true` plus distinct distractors drawn from `pool` *with its repetitions*, so distractors are as
    frequent (and as short) as real answers: otherwise a model that merely prefers short strings wins."""
    seen, distractors = {true.lower()}, []
    for _ in range(50 * n_choices):
        if len(distractors) == n_choices - 1:
            break
        candidate = pool[rng.randrange(len(pool))]
        if candidate.lower() not in seen:
            seen.add(candidate.lower())
            distractors.append(candidate)
    choices = distractors + [true]
    rng.shuffle(choices)
    return choices, choices.index(true)


def build_cloze(
    documents: Sequence[str],
    n_items: int,
    seed: int,
    n_choices: int = 4,
    context_chars: int = 600,
    min_context_chars: int = 100,
) -> list[dict]:
    rng = _rng(seed, "cloze")
    candidates = []
    for doc_index, text in enumerate(documents):
        for span in final_word_spans(text):
            if _has_context(text, span.start, context_chars, min_context_chars):
                candidates.append((doc_index, span.start, text[span.start : span.end]))
    pools = {
        upper: [word for _, _, word in candidates if word[0].isupper() == upper] for upper in (True, False)
    }
    return _choice_items(
        documents, _pick(candidates, n_items, rng), lambda word: pools[word[0].isupper()], n_choices,
        context_chars, rng,
    )


def build_nextsent(
    documents: Sequence[str],
    n_items: int,
    seed: int,
    n_choices: int = 4,
    context_chars: int = 400,
    min_context_chars: int = 50,
    sentence_chars: tuple[int, int] = (20, MAX_CHOICE_CHARS),
) -> list[dict]:
    rng = _rng(seed, "nextsent")
    low, high = sentence_chars
    candidates, pool = [], []
    for doc_index, text in enumerate(documents):
        for span in sentence_spans(text):
            sentence = text[span.start : span.end]
            if not low <= len(sentence.encode("utf-8")) <= high:  # bytes: what a byte window holds
                continue
            pool.append(sentence)
            if _has_context(text, span.start, context_chars, min_context_chars):
                candidates.append((doc_index, span.start, sentence))
    return _choice_items(documents, _pick(candidates, n_items, rng), lambda _: pool, n_choices, context_chars, rng)


def _choice_items(documents, picked, pool_for, n_choices: int, context_chars: int, rng) -> list[dict]:
    """Multiple-choice items: the true continuation among distractors, after the text that precedes it."""
    items = []
    for doc_index, offset, target in picked:
        choices, label = _choices(target, pool_for(target), n_choices, rng)
        if len(choices) < 2:
            continue
        context = context_before(documents[doc_index], offset, context_chars)
        items.append(
            {"context": context, "choices": choices, "label": label, "doc": doc_index, "offset": offset}
        )
    return items


def build_ppl(
    documents: Sequence[str], n_items: int, seed: int, passage_chars: int = 1000, min_chars: int = 200
) -> list[dict]:
    rng = _rng(seed, "ppl")
    candidates = []
    for doc_index, text in enumerate(documents):
        for span in passage_spans(text, passage_chars):
            if min_chars <= span.end - span.start <= 2 * passage_chars:
                candidates.append(
                    {"text": text[span.start : span.end], "doc": doc_index, "offset": span.start}
                )
    return _pick(candidates, n_items, rng)


BUILDERS = {"cloze": build_cloze, "nextsent": build_nextsent, "ppl": build_ppl}

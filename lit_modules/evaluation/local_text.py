"""Plain-text cutting shared by the local task builders: sentences, sentence-final words, passages.

Rules are deliberately simple and language-agnostic enough for plays, prose and technical docs:
a sentence ends at . ! or ? followed by whitespace, or at a blank line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n\s*\n\s*")
# A target word: letters only, after whitespace, directly followed by sentence-final punctuation.
_FINAL_WORD = re.compile(r"(?<=\s)([A-Za-z]{3,})(?=[.!?](?:\s|$))")


@dataclass(frozen=True)
class Span:
    start: int
    end: int


def sentence_spans(text: str) -> list[Span]:
    """Non-empty sentences as character spans (the whitespace between them belongs to neither)."""
    spans, start = [], 0
    for match in _SENTENCE_BREAK.finditer(text):
        if match.start() > start:
            spans.append(Span(start, match.start()))
        start = match.end()
    if start < len(text):
        spans.append(Span(start, len(text)))
    return spans


def final_word_spans(text: str) -> list[Span]:
    """Words of three or more letters that end a sentence."""
    return [Span(m.start(1), m.end(1)) for m in _FINAL_WORD.finditer(text)]


def context_before(text: str, position: int, max_chars: int) -> str:
    """Up to `max_chars` characters ending at `position`, starting at a line start when one is in range."""
    start = max(0, position - max_chars)
    if start > 0:
        newline = text.find("\n", start, position)
        if newline != -1:
            start = newline + 1
    return text[start:position]


def passage_spans(text: str, max_chars: int) -> list[Span]:
    """Consecutive paragraphs grouped into spans of at most about `max_chars` (longer paragraphs stay whole).

    Spans index the original text, so a passage keeps its exact whitespace.
    """
    paragraphs = [Span(m.start(), m.end()) for m in re.finditer(r"\S(?:.*?\S)?(?=\n\s*\n|\s*$)", text, re.S)]
    found: list[Span] = []
    current = None
    for paragraph in paragraphs:
        if current is not None and paragraph.end - current.start > max_chars:
            found.append(current)
            current = None
        current = paragraph if current is None else Span(current.start, paragraph.end)
    if current is not None:
        found.append(current)
    return found

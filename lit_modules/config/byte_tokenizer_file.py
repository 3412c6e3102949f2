"""The platform's byte tokenizer as a `tokenizer.json`, and whether a file is it (the same ids for any text).

ByteTokenizer (lit_modules.data.tokenization): id b (0..255) is the UTF-8 byte b, then <|bos|> 256, <|eos|> 257,
<|pad|> 258; encoding adds no special token. The same in the `tokenizers` format: a byte-level BPE with no
merges whose vocabulary puts GPT-2's printable stand-in of byte b at id b (ByteLevel pre-tokenizer without its
word-splitting regex, ByteLevel decoder), and the three specials as added tokens. It lives in config/ because
`init_from=hf:<folder>` recognises an exported byte-tokenizer folder while the run config is made
(config/hf_start.py); lit_modules.export writes it (export/byte_tokenizer.py).
"""

from __future__ import annotations

from pathlib import Path

from lit_modules.config.data import BYTE_VOCAB_SIZE

BYTE_SPECIALS = ("<|bos|>", "<|eos|>", "<|pad|>")  # ids 256, 257, 258
# Text whose ids show a normalizer, a prefix space, a word-splitting regex or an added BOS/EOS: each would give
# other ids than the bytes.
PROBE = ("To be, or not to be: that is the question.\n\théllo WÖRLD — ✓ 日本語 🙂  e\u0301 ﬁ \x00\x7f"
         + "".join(map(chr, range(32, 127))))


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (the one the ByteLevel pre-tokenizer uses)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


def byte_vocabulary() -> dict[str, int]:
    """Every token of the byte tokenizer's file and its id, the specials included."""
    vocab = {char: b for b, char in bytes_to_unicode().items()}
    vocab.update({token: 256 + i for i, token in enumerate(BYTE_SPECIALS)})
    return vocab


def byte_tokenizer_backend():
    """The byte tokenizer as a `tokenizers.Tokenizer` (serialise it with `.to_str()`)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {char: b for b, char in bytes_to_unicode().items()}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in BYTE_SPECIALS])
    return backend


def is_byte_tokenizer_file(path: str | Path) -> bool:
    """True when the tokenizer.json at `path` gives every text the byte tokenizer's ids: its vocabulary is the
    byte tokenizer's, and a probe text encodes to its UTF-8 bytes (with and without special tokens) and back."""
    from lit_modules.config.tokenizer_file import load_tokenizer_file
    from lit_modules.errors import DataError

    try:
        backend = load_tokenizer_file(path)
    except DataError:
        return False
    if backend.get_vocab_size(with_added_tokens=True) != BYTE_VOCAB_SIZE:
        return False
    if backend.get_vocab(with_added_tokens=True) != byte_vocabulary():
        return False
    expected = list(PROBE.encode("utf-8"))
    for add_special in (False, True):
        if backend.encode(PROBE, add_special_tokens=add_special).ids != expected:
            return False
    return backend.decode(expected) == PROBE

"""The platform's byte tokenizer (lit_modules.data.tokenization.ByteTokenizer) as a `tokenizer.json`.

ByteTokenizer: id b (0..255) is the UTF-8 byte b, then <|bos|> 256, <|eos|> 257, <|pad|> 258; encoding adds no
special token; decoding drops ids >= 256 and replaces undecodable bytes by U+FFFD. The same in the
`tokenizers` format: a byte-level BPE with no merges whose vocabulary puts GPT-2's printable stand-in of byte
b at id b (ByteLevel pre-tokenizer without its word-splitting regex, ByteLevel decoder), and the three
specials as added tokens.
"""

from __future__ import annotations

from lit_modules.data.tokenization import BOS_TOKEN, EOS_TOKEN, PAD_TOKEN, ByteTokenizer


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (the one the ByteLevel pre-tokenizer uses)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


def byte_tokenizer_json() -> str:
    """A tokenizer.json that encodes and decodes exactly as ByteTokenizer does."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {char: b for b, char in _bytes_to_unicode().items()}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    specials = [BOS_TOKEN, EOS_TOKEN, PAD_TOKEN]
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    tokenizer = ByteTokenizer()
    ids = [backend.token_to_id(t) for t in specials]
    assert ids == [tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id], ids  # the ids the model learned
    return backend.to_str()

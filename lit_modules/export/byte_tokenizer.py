"""The platform's byte tokenizer (lit_modules.data.tokenization.ByteTokenizer) as a `tokenizer.json`.

The file itself is config/byte_tokenizer_file.py's (init_from=hf: recognises it there, below data/); here it
is checked against ByteTokenizer's own ids and special tokens before an export writes it.
"""

from __future__ import annotations

from lit_modules.config.byte_tokenizer_file import BYTE_SPECIALS, byte_tokenizer_backend
from lit_modules.data.tokenization import BOS_TOKEN, EOS_TOKEN, PAD_TOKEN, ByteTokenizer


def byte_tokenizer_json() -> str:
    """A tokenizer.json that encodes and decodes exactly as ByteTokenizer does."""
    backend = byte_tokenizer_backend()
    tokenizer = ByteTokenizer()
    specials = [BOS_TOKEN, EOS_TOKEN, PAD_TOKEN]
    assert tuple(specials) == BYTE_SPECIALS, specials  # the names the model learned
    ids = [backend.token_to_id(t) for t in specials]
    assert ids == [tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id], ids  # the ids the model learned
    return backend.to_str()

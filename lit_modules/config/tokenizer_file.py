"""Read a `tokenizer.json` (the `tokenizers` library's format); a missing or malformed file is a DataError.

Its own module, in config/ beside data.py, because both the tokenizer config (the vocabulary size a
pretrained file gives, known before any data is read) and data/'s tokenizers read such files.
"""

from __future__ import annotations

from pathlib import Path

from lit_modules.errors import DataError


def load_tokenizer_file(path: str | Path):
    """Load a tokenizer.json into a `tokenizers.Tokenizer`; a missing or bad file is a DataError."""
    from tokenizers import Tokenizer as Backend

    path = Path(path)
    if not path.is_file():
        raise DataError(
            f"The tokenizer file {path} does not exist; set tokenizer.path to a tokenizer.json file."
        )
    try:
        return Backend.from_file(str(path))
    except Exception:  # the library raises a bare Exception for malformed JSON
        raise DataError(
            f"The tokenizer file {path} is not a valid tokenizer.json; re-export it or pick another file."
        ) from None

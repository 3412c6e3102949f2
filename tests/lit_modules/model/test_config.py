"""Every conf/model preset loads into the LlamaConfig schema and its header comment is accurate."""

import glob
import re

import pytest
import torch
from omegaconf import OmegaConf

from lit_modules.model import Llama, LlamaConfig, count_parameters
from tests.helpers.runs import REPO

ROOT = REPO
PRESETS = sorted(glob.glob(str(ROOT / "conf/model/*.yaml")))


def test_expected_presets_exist():
    names = {p.split("/")[-1][:-5] for p in PRESETS}
    assert {"tiny", "small", "llama_20m", "gpt2_124m", "llama_271m", "llama_350m", "llama_1b"} <= names


@pytest.mark.parametrize("path", PRESETS, ids=lambda p: p.split("/")[-1])
def test_preset_builds_and_comment_count_is_right(path):
    raw = OmegaConf.load(path)
    assert "vocab_size" not in raw  # comes from the tokenizer
    schema = OmegaConf.structured(LlamaConfig)
    cfg = OmegaConf.to_object(OmegaConf.merge(schema, raw))
    assert cfg.problems() == []
    cfg.vocab_size = 32000
    with torch.device("meta"):  # no memory for the 1B preset
        model = Llama(cfg)
    header = open(path).readline()
    claimed = int(re.search(r"([\d,]+) non-embedding", header).group(1).replace(",", ""))
    assert count_parameters(model)["non_embedding"] == claimed

"""The data and tokenizer configs: defaults, the YAML groups against their schema, one-sentence problems."""

import pytest
from omegaconf import OmegaConf

from lit_modules.data import DataConfig, DataError, TokenizerConfig, prepare_corpus, static_vocab_size
from tests.helpers.data import assert_one_sentence
from tests.helpers.runs import REPO


def test_default_configs_have_no_problems():
    assert DataConfig().problems() == []
    assert TokenizerConfig().problems() == []


def _group_file(path):
    """A group file as Hydra composes it: the siblings its `defaults` list names first, then itself."""
    node = OmegaConf.load(path)
    parents = [OmegaConf.load(path.parent / f"{name}.yaml") for name in node.pop("defaults", []) if name != "_self_"]
    return OmegaConf.merge(*parents, node) if parents else node


@pytest.mark.parametrize("group,schema", [("data", DataConfig), ("tokenizer", TokenizerConfig)])
def test_yaml_files_match_their_schema(group, schema):
    files = sorted((REPO / "conf" / group).glob("*.yaml"))
    assert files
    for path in files:
        cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), _group_file(path)))
        if path.stem in ("text_files", "pretrained"):
            continue  # need a user-supplied path
        assert cfg.problems() == [], path


def test_problems_are_reported_one_sentence_each():
    bad = DataConfig(source="ftp", seq_len=1, batch_size=0, heldout_fraction=1.0)
    problems = bad.problems()
    assert len(problems) == 4
    for problem in problems:
        assert_one_sentence(problem)
    assert DataConfig(source="hf").problems() == ["data.source is hf but data.hf_path is not set."]
    assert DataConfig(source="text_files").problems()
    assert TokenizerConfig(kind="pretrained").problems()
    with pytest.raises(DataError):
        prepare_corpus(DataConfig(seq_len=1))


def test_static_vocab_size_needs_no_corpus():
    assert static_vocab_size(TokenizerConfig(kind="byte")) == 259
    assert static_vocab_size(OmegaConf.create({"kind": "bpe", "vocab_size": 1000, "path": None})) == 1000

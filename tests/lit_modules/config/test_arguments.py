"""The one key=value parser of the non-Hydra verbs: typed words, defaults, prefixes, the rest, one sentence."""

from __future__ import annotations

import pytest

from lit_modules.config.arguments import (
    DOTLIST,
    FLAG,
    HYDRA,
    INTS,
    NAMES,
    OPTIONAL_TEXT,
    POSITIVE_INT,
    Arg,
    Prefix,
    Verb,
    parse_words,
)
from lit_modules.config.errors import ConfigError

VERB = Verb(
    "demo",
    {"run": Arg(required="Say which run: run=<id>."), "workers": Arg(POSITIVE_INT), "report": Arg(FLAG, default=True),
     "arms": Arg(NAMES), "seeds": Arg(INTS), "launcher": Arg(OPTIONAL_TEXT, default="x"),
     "runs_dir": Arg(default="runs", forward=True)},
    aliases={"seed": "seeds"},
    prefixes={"finetune.": Prefix(("steps", "lr"), "recipe field")},
    refused={"+arm": "+arm= would fight the grid; use arms=."},
    rest=HYDRA,
)


def test_words_are_typed_defaulted_and_routed():
    words = parse_words(["run=abc", "workers=3", "report=no", "arms=[a, b]", "seed=0,1", "launcher=",
                         "runs_dir=/tmp/r", "finetune.steps=5", "trainer.max_steps=2", "~eval"], VERB)
    assert words.values == {"run": "abc", "workers": 3, "report": False, "arms": ["a", "b"], "seeds": ["0", "1"],
                            "launcher": None, "runs_dir": "/tmp/r"}
    assert words.prefixed == {"finetune.": {"steps": "5"}}
    assert words.rest == ["runs_dir=/tmp/r", "trainer.max_steps=2", "~eval"]  # forwarded, then the overrides
    assert words.given == {"run", "workers", "report", "arms", "seeds", "launcher", "runs_dir"}
    assert parse_words(["run=a"], VERB)["report"] is True and parse_words(["run=a"], VERB)["launcher"] == "x"


@pytest.mark.parametrize("argv, sentence", [
    ([], "Say which run: run=<id>."),
    (["run=a", "workers=0"], "workers=0 must be a positive integer."),
    (["run=a", "report=maybe"], "report=maybe must be true or false."),
    (["run=a", "arms=,"], "arms= lists nothing; give comma-separated arms."),
    (["run=a", "seeds=1,x"], "seeds=1,x must be comma-separated integers."),
    (["run=a", "finetune.epochs=3"], "Unknown recipe field 'epochs'; the fields are lr, steps."),
    (["run=a", "+arm=a/b"], "+arm= would fight the grid; use arms=."),
    (["run=a", "oops"], "Arguments are key=value words; 'oops' is not one."),
])
def test_bad_words_are_one_sentence(argv, sentence):
    with pytest.raises(ConfigError) as err:
        parse_words(argv, VERB)
    assert str(err.value) == sentence


def test_a_verb_without_a_rest_names_its_arguments_and_a_dotlist_takes_no_additions():
    closed = Verb("report", {"exp": Arg(), "log": Arg(FLAG, default=True)}, case_insensitive=True)
    assert parse_words(["EXP=smoke", "--log=false"], closed).values == {"exp": "smoke", "log": False}
    with pytest.raises(ConfigError, match="Unknown argument 'colour' for report; the arguments are exp=, log=."):
        parse_words(["colour=blue"], closed)
    dotlist = Verb("finetune", {}, rest=DOTLIST)
    assert parse_words(["optim.lr=0.1"], dotlist).rest == ["optim.lr=0.1"]
    for word in ("+optim.x=1", "~optim"):
        with pytest.raises(ConfigError, match="key=value words"):
            parse_words([word], dotlist)

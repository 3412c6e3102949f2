"""The command line of the verbs that are not Hydra apps: `key=value` words with typed fields.

    VERB = Verb("evaluate", {"run": Arg(required="Say which run to evaluate: run=<MLflow run id>."),
                             "runs_dir": Arg(default="runs"), "tasks": Arg(NAMES)})
    parsed = parse_words(argv, VERB)        # parsed.values["run"], parsed.prefixed["finetune."], parsed.rest

Fine-tune, evaluate, the ablation, evidence and plasticity drivers, the report and the ledger all read
their words here, so a typo gets the same kind of sentence everywhere: which word, what it must be. A bad
word raises ConfigError (exit code 2 at every verb) before anything is read or run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from lit_modules.config.errors import ConfigError

TEXT = "text"  # any string
OPTIONAL_TEXT = "optional text"  # any string; empty means None
POSITIVE_INT = "positive integer"
FLAG = "flag"  # true/false (also 1/0, yes/no)
NAMES = "names"  # comma-separated, e.g. arms=a,b or tasks=[a,b]
INTS = "integers"  # comma-separated integers, e.g. seeds=0,1,2
KINDS = (TEXT, OPTIONAL_TEXT, POSITIVE_INT, FLAG, NAMES, INTS)

TRUE_WORDS = ("true", "1", "yes")
FALSE_WORDS = ("false", "0", "no")

# What a verb does with words that are none of its own arguments.
REFUSE = "refuse"  # an error naming the arguments it has
DOTLIST = "dotlist"  # key=value run-config overrides, collected in `rest`
HYDRA = "hydra"  # Hydra overrides (key=value, +key=value, ~key), collected in `rest`


@dataclass(frozen=True)
class Arg:
    kind: str = TEXT
    default: Any = None
    required: str | None = None  # the sentence when the word is missing
    forward: bool = False  # also passed on in `rest` (e.g. runs_dir, which the grid needs too)
    non_empty: bool = False


@dataclass(frozen=True)
class Prefix:
    """Words `<prefix><field>=value`, collected by field (e.g. `finetune.steps=5` -> {"steps": "5"})."""

    fields: tuple[str, ...] = ()  # allowed fields (empty: any)
    what: str = "field"  # how a field is called in the refusal ("recipe field")


@dataclass(frozen=True)
class Verb:
    name: str
    args: dict[str, Arg]
    aliases: dict[str, str] = field(default_factory=dict)  # e.g. seed -> seeds
    prefixes: dict[str, Prefix] = field(default_factory=dict)
    rest: str = REFUSE
    refused: dict[str, str] = field(default_factory=dict)  # key -> the sentence saying why not
    case_insensitive: bool = False  # EXP= and exp= alike (leading dashes dropped too)


@dataclass
class Parsed:
    values: dict[str, Any]  # every argument: as given, else its default
    prefixed: dict[str, dict[str, str]]
    rest: list[str]
    given: set[str] = field(default_factory=set)  # the arguments the words named

    def __getitem__(self, key: str) -> Any:
        return self.values[key]


def parse_words(argv: Iterable[str], verb: Verb) -> Parsed:
    """Read `argv` as `verb`'s words; ConfigError with one sentence for the first bad word."""
    values = {k: a.default for k, a in verb.args.items()}
    prefixed: dict[str, dict[str, str]] = {p: {} for p in verb.prefixes}
    rest: list[str] = []
    seen: set[str] = set()
    for word in argv:
        key, sep, value = word.partition("=")
        if verb.case_insensitive:
            key = key.lower().lstrip("-")
        key = verb.aliases.get(key, key)
        if key in verb.refused:
            raise ConfigError(verb.refused[key])
        if sep and key in verb.args:
            values[key] = _typed(key, value, verb.args[key])
            seen.add(key)
            if verb.args[key].forward:
                rest.append(word)
            continue
        prefix = next((p for p in verb.prefixes if sep and key.startswith(p)), None)
        if prefix is not None:
            name = key[len(prefix):]
            spec = verb.prefixes[prefix]
            if spec.fields and name not in spec.fields:
                raise ConfigError(f"Unknown {spec.what} '{name}'; the fields are {', '.join(sorted(spec.fields))}.")
            prefixed[prefix][name] = value
            continue
        if verb.rest == REFUSE or not _is_override(word, verb.rest):
            raise ConfigError(_unknown_sentence(word, key, sep, verb))
        rest.append(word)
    for key, arg in verb.args.items():
        if arg.required and key not in seen:
            raise ConfigError(arg.required)
    return Parsed(values, prefixed, rest, seen)


def _typed(key: str, value: str, arg: Arg) -> Any:
    if arg.non_empty and not value:
        raise ConfigError(f"{key}= names nothing; give {key}=<value>.")
    if arg.kind == OPTIONAL_TEXT:
        return value or None
    if arg.kind == POSITIVE_INT:
        if not value.isdigit() or int(value) < 1:
            raise ConfigError(f"{key}={value} must be a positive integer.")
        return int(value)
    if arg.kind == FLAG:
        if value.lower() in TRUE_WORDS:
            return True
        if value.lower() in FALSE_WORDS:
            return False
        raise ConfigError(f"{key}={value} must be true or false.")
    if arg.kind in (NAMES, INTS):
        items = [v.strip() for v in value.strip("[]").split(",") if v.strip()]
        if not items:
            raise ConfigError(f"{key}= lists nothing; give comma-separated {key}.")
        if arg.kind == INTS and not all(_is_int(v) for v in items):
            raise ConfigError(f"{key}={value} must be comma-separated integers.")
        return items
    return value


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _is_override(word: str, style: str) -> bool:
    key, sep, _ = word.partition("=")
    if style == HYDRA:
        return bool(sep) or (word.startswith("~") and len(word) > 1)
    return bool(sep) and not key.startswith(("+", "~"))  # DOTLIST: plain key=value only


def _unknown_sentence(word: str, key: str, sep: str, verb: Verb) -> str:
    if not sep or verb.rest != REFUSE:
        return f"Arguments are key=value words; {word!r} is not one."
    known = ", ".join(f"{k}=" for k in verb.args)
    return f"Unknown argument {key!r} for {verb.name}; the arguments are {known}."

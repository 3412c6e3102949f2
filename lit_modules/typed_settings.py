"""A plug-in's settings as a dataclass whose field types are its checks: one sentence per bad value.

    @dataclass
    class ZLossSettings:
        coef: Annotated[float, Bound(ge=0)] = 1e-4

    typed_problems(ZLossSettings(coef=-1), "techniques.z_loss")
    # ['techniques.z_loss.coef must be a finite number >= 0, not -1.']

A field takes what its annotation says: bool, int, float (finite; an int is a float), str, `X | None` (null
allowed), `list[X]` and `dict[str, X]` of those, narrowed with `Annotated` markers: `OneOf(choices)`,
`Bound(...)` and, on a list, `Listed(non_empty=..., unique=...)`. The values come from a config (Hydra hands
them over unchecked), so nothing here trusts them; a technique or an optimizer checks what spans several
fields (or the run) itself. It sits below every layer that has settings and imports nothing of the project.
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints


@dataclass(frozen=True)
class OneOf:
    """The value is one of `choices` (compared with its type: true is not 1)."""

    choices: tuple
    note: str = ""  # said in brackets after the choices, e.g. "the published table"


@dataclass(frozen=True)
class Bound:
    """The number lies within these limits; `text` replaces the generated wording ("at least 2 to ...")."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    text: str = ""


@dataclass(frozen=True)
class Listed:
    non_empty: bool = False
    unique: bool = False


@dataclass(frozen=True)
class _Kind:
    """A field's annotation taken apart: its plain type, its markers and whether null is allowed."""

    base: Any
    marks: tuple
    nullable: bool = False

    def mark(self, kind: type) -> Any:
        return next((m for m in self.marks if isinstance(m, kind)), None)


def _kind(hint: Any) -> _Kind:
    marks: tuple = ()
    nullable = False
    while True:
        origin = get_origin(hint)
        if origin is Annotated:
            hint, *extra = get_args(hint)
            marks += tuple(extra)
        elif origin in (Union, types.UnionType) and type(None) in get_args(hint):
            nullable = True
            rest = [a for a in get_args(hint) if a is not type(None)]
            hint = rest[0] if len(rest) == 1 else Union[tuple(rest)]
        else:
            return _Kind(hint, marks, nullable)


def _number(x: float) -> str:
    return f"{x:g}"


def _bound_text(bound: Bound | None, integer: bool) -> str:
    kind = "an integer" if integer else "a finite number"
    if bound is None:
        return kind
    if bound.text:
        return bound.text
    low = (f"[{_number(bound.ge)}" if bound.ge is not None else f"({_number(bound.gt)}"
           if bound.gt is not None else None)
    high = (f"{_number(bound.le)}]" if bound.le is not None else f"{_number(bound.lt)})"
            if bound.lt is not None else None)
    if low and high:
        return f"{kind} in {low}, {high}"
    if bound.gt == 0 and not high:
        return "a positive integer" if integer else "a positive number"
    if low:
        return f"{kind} {'>=' if bound.ge is not None else '>'} {low[1:]}"
    if high:
        return f"{kind} {'<=' if bound.le is not None else '<'} {high[:-1]}"
    return kind


def _within(x: float, bound: Bound | None) -> bool:
    if bound is None:
        return True
    return ((bound.ge is None or x >= bound.ge) and (bound.gt is None or x > bound.gt)
            and (bound.le is None or x <= bound.le) and (bound.lt is None or x < bound.lt))


def _choices(one_of: OneOf) -> str:
    return ", ".join(map(str, one_of.choices)) + (f" ({one_of.note})" if one_of.note else "")


def _is_choice(value: Any, one_of: OneOf) -> bool:
    return any(type(value) is type(c) and value == c for c in one_of.choices)


def _scalar_problem(value: Any, kind: _Kind, key: str) -> str | None:
    """The sentence for a bad scalar (bool, int, float, str, one of some choices), or None."""
    one_of, bound = kind.mark(OneOf), kind.mark(Bound)
    if one_of is not None:
        if _is_choice(value, one_of):
            return None
        wanted = f"one of {_choices(one_of)}"
    elif kind.base is bool:
        if isinstance(value, bool):
            return None
        wanted = "true or false"
    elif kind.base is int:
        if isinstance(value, int) and not isinstance(value, bool) and _within(value, bound):
            return None
        wanted = _bound_text(bound, integer=True)
    elif kind.base is float:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if number and math.isfinite(value) and _within(value, bound):
            return None
        wanted = _bound_text(bound, integer=False)
    elif kind.base is str:
        if isinstance(value, str):
            return None
        wanted = "a string"
    else:
        raise TypeError(f"{key}: settings of type {kind.base!r} have no check here.")
    return f"{key} must be {wanted}{' or null' if kind.nullable else ''}, not {value!r}."


def _list_problems(value: Any, kind: _Kind, key: str) -> list[str]:
    (item_hint,) = get_args(kind.base) or (Any,)
    item, listed = _kind(item_hint), kind.mark(Listed) or Listed()
    one_of = item.mark(OneOf)
    if not isinstance(value, list) or (listed.non_empty and not value):
        drawn = f" drawn from {_choices(one_of)}" if one_of else ""
        return [f"{key} must be a {'non-empty ' if listed.non_empty else ''}list{drawn}, not {value!r}."]
    if one_of is not None:
        unknown = [v for v in value if not _is_choice(v, one_of)]
        problems = [f"Unknown {key} {', '.join(map(str, unknown))}; choose from {_choices(one_of)}."] if unknown else []
    else:
        problems = [p for i, v in enumerate(value) for p in _value_problems(v, item, f"{key}[{i}]")]
    if listed.unique:
        twice = [v for i, v in enumerate(value) if v in value[:i]]
        problems += [f"{key} lists {', '.join(map(str, dict.fromkeys(twice)))} twice."] if twice else []
    return problems


def _dict_problems(value: Any, kind: _Kind, key: str) -> list[str]:
    key_hint, value_hint = get_args(kind.base) or (str, Any)
    if not isinstance(value, Mapping):
        return [f"{key} must be a mapping of names to values, not {value!r}."]
    one_of = _kind(key_hint).mark(OneOf)
    unknown = [k for k in value if one_of is not None and not _is_choice(k, one_of)]
    problems = [f"Unknown {key} {', '.join(map(str, unknown))}; choose from {_choices(one_of)}."] if unknown else []
    kind_of_value = _kind(value_hint)
    return problems + [p for k, v in value.items() if k not in unknown
                       for p in _value_problems(v, kind_of_value, f"{key}.{k}")]


def _value_problems(value: Any, kind: _Kind, key: str) -> list[str]:
    if value is None and kind.nullable:
        return []
    origin = get_origin(kind.base)
    if kind.base is Any:
        return []
    if origin is list or kind.base is list:
        return _list_problems(value, kind, key)
    if origin is dict or kind.base is dict:
        return _dict_problems(value, kind, key)
    problem = _scalar_problem(value, kind, key)
    return [problem] if problem else []


def typed_problems(settings: Any, prefix: str, keys: Mapping[str, str] | None = None) -> list[str]:
    """A sentence for every field of the dataclass `settings` whose value its annotation refuses, naming it
    `<prefix>.<field>` (or as `keys` says, where a field sits elsewhere in the config)."""
    hints = get_type_hints(type(settings), include_extras=True)
    keys = keys or {}
    return [p for f in fields(settings) for p in _value_problems(getattr(settings, f.name), _kind(hints[f.name]),
                                                                   keys.get(f.name, f"{prefix}.{f.name}"))]


def setting_names(settings_type: type | None) -> list[str]:
    return [f.name for f in fields(settings_type)] if settings_type is not None else []


def unknown_setting_problems(names: Sequence[str], given: Mapping[str, Any], prefix: str, owner: str) -> list[str]:
    """One sentence naming the keys in `given` that are none of the settings `names`."""
    unknown = [k for k in given if k not in names]
    if not unknown:
        return []
    keys = ", ".join(f"{prefix}.{k}" for k in unknown)
    return [f"{keys} {'is not a setting' if len(unknown) == 1 else 'are not settings'} of {owner}; its settings "
            f"are {', '.join(names) or 'none'}."]


def field_defaults(settings_type: type) -> dict[str, Any]:
    """Each field's default (None where it has none): what a field left out of a config means."""
    out = {}
    for f in fields(settings_type):
        out[f.name] = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else None)
    return out

"""Reading a cached JSON record (a provenance or manifest file) that is either whole or unusable.

The corpus provenance, the shard manifest and the eval-task manifest are all read the same way: parse the
file, touch the fields the caller relies on, and turn any failure into the caller's one-sentence DataError,
so a damaged cache is one actionable line instead of a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from lit_modules.errors import DataError

# What a truncated, hand-edited or foreign JSON file raises when parsed and indexed.
RECORD_ERRORS: tuple[type[Exception], ...] = (ValueError, KeyError, TypeError)


def read_record(path: Path, check: Callable[[dict], object], message: str,
                also: tuple[type[Exception], ...] = ()) -> dict:
    """The parsed JSON at `path`, after `check(record)` ran on it.

    `check` indexes the fields the caller needs (a missing one raises) and may return False for a record
    that parses but is not intact; either way, and for any exception in `also`, DataError(`message`).
    """
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        intact = check(record) is not False
    except RECORD_ERRORS + also:
        intact = False
    if not intact:
        raise DataError(message) from None
    return record

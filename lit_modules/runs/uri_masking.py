"""A URL's password never leaves the process: it is masked wherever a URL is printed or recorded.

Storage and tracking URLs (`postgresql+psycopg://user:secret@host/db`, `http://user:secret@host`) reach
MLflow params and tags, config artifacts, sweep summaries, reports and terminal output; each of those goes
through `mask_password` (or `mask_tree` for a whole config). A password is better not put in a URL at
all: libpq reads PGPASSWORD or ~/.pgpass, MLflow reads MLFLOW_TRACKING_PASSWORD.
"""

from __future__ import annotations

import os
import re
from typing import Any

MASK = "***"
# MLflow prints "View run <name> at: <tracking URI>/#/..." whenever a run on a server ends.
SUPPRESS_URL_PRINTING = "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"
# scheme://user:password@ ; the password runs to the last '@' before a space or quote, so one holding an
# unescaped '/' or ':' is still masked whole.
_PASSWORD_IN_URL = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@'\"]*:)(?P<password>[^\s'\"]*)@")


def mask_password(text: str) -> str:
    """`text` (a URL, a sentence, a YAML dump) with the password of every URL in it replaced by ***."""
    return _PASSWORD_IN_URL.sub(rf"\g<head>{MASK}@", text)


def mask_tree(value: Any) -> Any:
    """A config tree (dicts, lists, scalars) with every string masked; other values unchanged."""
    if isinstance(value, str):
        return mask_password(value)
    if isinstance(value, dict):
        return {key: mask_tree(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(mask_tree(item) for item in value)
    return value


def keep_off_stdout(uri: str) -> str:
    """`uri`, unchanged; when it carries a password, MLflow is told not to print run links built from it."""
    if mask_password(uri) != uri:
        os.environ[SUPPRESS_URL_PRINTING] = "true"
    return uri

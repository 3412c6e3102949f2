"""The Python language reference prose shipped with CPython (`pydoc_data.topics`).

Always present, no download: a small (~0.46 MB) technical-English corpus for
fine-tuning experiments. Each help topic (e.g. "if", "assignment") is one document,
kept exactly as CPython ships it. The text depends on the Python version, which the
provenance records.
"""

from __future__ import annotations

import platform

from lit_modules.errors import DataError

EXTRACTION_RULE_VERSION = 1


def load_python_docs() -> tuple[list[tuple[str, str]], dict]:
    """(topic name, text) documents sorted by topic, plus their provenance."""
    try:
        from pydoc_data.topics import topics
    except ImportError:  # some distributions split it out of the base Python package
        raise DataError(
            "This Python has no pydoc_data module (the python_docs corpus); install your distribution's "
            "full standard library or use data=shakespeare."
        ) from None

    provenance = {
        "module": "pydoc_data.topics",
        "python_version": platform.python_version(),
        "extraction_rule_version": EXTRACTION_RULE_VERSION,
        "license": "PSF",
    }
    return sorted(topics.items()), provenance

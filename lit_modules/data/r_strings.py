"""Character vectors from an R package's lazy-load data base (`data/Rdata.rdb`), read without R.

The `.rdb` file is a run of blobs, each a 4-byte big-endian uncompressed length and a zlib stream of one
serialized R object (R's XDR format, version 2 or 3). A data set that is a plain character vector (as each of
janeaustenr's novels is: one element per line of the book) serializes as a STRSXP of CHARSXP elements; that
is the only shape read here, and any other blob is refused in one sentence.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from lit_modules.errors import DataError

STRSXP, CHARSXP = 16, 9
HAS_ATTRIBUTES = 1 << 9
# CHARSXP encoding bits (R's gp field, flags >> 12): LATIN1 4, UTF8 8, ASCII 64
LATIN1 = 1 << 2


def rdb_blobs(rdb: bytes) -> list[bytes]:
    """Each serialized object of an .rdb file, decompressed, in file order."""
    blobs, position = [], 0
    while position < len(rdb):
        expected = struct.unpack(">I", rdb[position : position + 4])[0]
        stream = zlib.decompressobj()
        blob = stream.decompress(rdb[position + 4 :])
        if len(blob) != expected:
            raise DataError(f"An R data blob at byte {position} holds {len(blob)} bytes, not {expected}.")
        blobs.append(blob)
        position = len(rdb) - len(stream.unused_data)
    return blobs


def character_vector(blob: bytes) -> list[str]:
    """The strings of one serialized character vector (NA elements dropped)."""
    reader = _Reader(blob)
    if reader.take(2) != b"X\n":
        raise DataError("An R data blob is not in R's XDR serialization format.")
    version = reader.integer()
    reader.take(8)  # the writing R's version and the oldest R that reads it
    if version == 3:
        reader.take(reader.integer())  # the native encoding's name
    flags = reader.integer()
    if flags & 0xFF != STRSXP or flags & HAS_ATTRIBUTES:
        raise DataError("An R data blob is not a plain character vector.")
    strings = []
    for _ in range(reader.integer()):
        flags = reader.integer()
        length = reader.integer()
        if flags & 0xFF != CHARSXP:
            raise DataError("An R character vector holds an element that is not a string.")
        if length == -1:
            continue  # NA
        raw = reader.take(length)
        strings.append(raw.decode("latin-1" if (flags >> 12) & LATIN1 else "utf-8"))
    return strings


def read_character_vectors(rdb_path: Path | None = None, rdb: bytes | None = None) -> list[list[str]]:
    """Every character vector of an .rdb file, in file order."""
    data = rdb if rdb is not None else Path(rdb_path).read_bytes()
    return [character_vector(blob) for blob in rdb_blobs(data)]


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.position = data, 0

    def take(self, count: int) -> bytes:
        if count < 0 or self.position + count > len(self.data):
            raise DataError("An R data blob ends before the object it describes.")
        chunk = self.data[self.position : self.position + count]
        self.position += count
        return chunk

    def integer(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

"""Stable hashes: file checksums, short fingerprints and a counter-based integer hash."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

FINGERPRINT_LENGTH = 16  # hex chars; 64 bits is plenty to tell cache entries apart


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fingerprint(*parts: Any) -> str:
    """Short stable hash of JSON-serialisable parts (order matters)."""
    payload = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return sha256_text(payload)[:FINGERPRINT_LENGTH]


def unit_interval_hash(key: str) -> float:
    """Map a string to a stable pseudo-random number in [0, 1)."""
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:15], 16) / 16**15


_GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def splitmix64(values: np.ndarray) -> np.ndarray:
    """Vectorised splitmix64 finaliser: a bijective, well-mixed uint64 -> uint64 hash.

    Used instead of a stateful RNG so that "which window does sample i read" is a
    pure function of (seed, i): resume and multi-rank layouts need no RNG state.
    """
    z = np.asarray(values, dtype=np.uint64) + _GOLDEN_GAMMA  # wraps mod 2**64
    z = (z ^ (z >> np.uint64(30))) * _MIX_1
    z = (z ^ (z >> np.uint64(27))) * _MIX_2
    return z ^ (z >> np.uint64(31))

"""Offline token counting for artifacts.

`estimate_tokens` counts exactly with ``tiktoken`` when it is installed *and* the encoding's BPE
file is already in tiktoken's local cache with its published hash (so tiktoken can never decide
to download it); otherwise it uses a heuristic modelled on the cl100k pre-tokenizer: words of up
to about six letters are one token, longer words one more per five letters, digits go in groups
of three, punctuation runs take one token per two characters, CJK characters one each, other
non-ASCII letters one per two characters, an indentation run one token and each line break one.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import tempfile
from collections.abc import Iterable
from functools import cache
from typing import Any

__all__ = ["ENCODINGS", "estimate_tokens", "exact_tokens_available"]

_BLOB = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
# The published SHA-256 of each encoding file (tiktoken_ext.openai_public). A cached file with
# another hash is ignored: tiktoken would re-download it, and we never download.
_HASHES = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "p50k_base": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    "r50k_base": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
}
ENCODINGS: tuple[str, ...] = tuple(_HASHES)
"""The encoding names `estimate_tokens` accepts."""

# Relative token density of each encoding against cl100k for the heuristic.
_DENSITY = {"cl100k_base": 1.0, "o200k_base": 0.95, "p50k_base": 1.12, "r50k_base": 1.18}

_PIECE = re.compile(
    r"(?P<ascii>[A-Za-z]+)"
    r"|(?P<digits>\d{1,3})"
    r"|(?P<cjk>[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\u3040-\u30ff]+)"
    r"|(?P<word>[^\W\d_]+)"
    r"|(?P<space>\s{2,})"
    r"|(?P<punct>[^\w\s]+)"
)

_CHUNK_CHARS = 1 << 20


def _cached_bpe_is_local(encoding: str) -> bool:
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return False
    key = hashlib.sha1(_BLOB.format(encoding).encode()).hexdigest()  # tiktoken's cache key
    path = os.path.join(cache_dir, key)
    try:
        with open(path, "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return False
    return digest == _HASHES[encoding]


@cache
def _exact_encoder(encoding: str) -> Any:
    """Return a tiktoken encoding when one can be had without the network, else None."""
    try:
        tiktoken = importlib.import_module("tiktoken")  # optional; untyped here on purpose
    except ImportError:
        return None
    if not _cached_bpe_is_local(encoding):
        return None
    try:
        return tiktoken.get_encoding(encoding)
    except Exception:  # any tiktoken failure falls back to the estimate
        return None


def exact_tokens_available(encoding: str) -> bool:
    """Return True when `estimate_tokens` counts ``encoding`` exactly (tiktoken, local data)."""
    return _exact_encoder(encoding) is not None


def _heuristic(line: str) -> int:
    tokens = 0
    for match in _PIECE.finditer(line):
        kind = match.lastgroup
        size = match.end() - match.start()
        if kind == "ascii":
            tokens += 1 + max(0, size - 6) // 5
        elif kind == "digits" or kind == "space":
            tokens += 1
        elif kind == "cjk":
            tokens += size
        elif kind == "word":
            tokens += (size + 1) // 2
        else:
            tokens += (size + 1) // 2
    return tokens


def estimate_tokens(lines: Iterable[str], encoding: str = "cl100k_base") -> int:
    """Count (or estimate) the tokens of the text made of ``lines`` joined with newlines.

    ``encoding`` must be one of `ENCODINGS`; lines are consumed in one streaming pass.
    """
    encoder = _exact_encoder(encoding)
    if encoder is not None:
        return _exact(lines, encoder)
    total = 0
    breaks = -1
    for line in lines:
        breaks += 1
        if line:
            total += _heuristic(line)
    return round((total + max(breaks, 0)) * _DENSITY[encoding])


def _exact(lines: Iterable[str], encoder: Any) -> int:
    total = 0
    batch: list[str] = []
    size = 0
    for line in lines:
        batch.append(line)
        size += len(line) + 1
        if size >= _CHUNK_CHARS:
            total += len(encoder.encode_ordinary("\n".join(batch) + "\n"))
            batch, size = [], 0
    if batch:
        total += len(encoder.encode_ordinary("\n".join(batch)))
    return total

"""Offline token counting for artifacts.

`estimate_tokens` counts exactly with ``tiktoken`` when it is installed *and* the encoding's BPE
files are already in tiktoken's local cache with their published hashes (so tiktoken can never
decide to download them); otherwise it uses a heuristic modelled on the cl100k pre-tokenizer:
words of up to about six letters are one token, longer words one more per five letters, digits
go in groups of three, punctuation runs take one token per two characters, CJK characters one
each, other non-ASCII letters one per two characters, an indentation run one token and each line
break one. The count is then scaled by the encoding's rough density against cl100k.

Besides tiktoken's encodings, the seeds' model family names are accepted (``claude``,
``gemini``, ``llama2``, ``llama3``, ``mistral``): their tokenizers have no local data here, so
they are always estimated.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
from collections.abc import Iterable
from functools import cache
from typing import Any, Literal, get_args

__all__ = ["ENCODINGS", "EncodingName", "estimate_tokens", "exact_tokens_available"]

EncodingName = Literal[
    "cl100k_base",
    "o200k_base",
    "p50k_base",
    "r50k_base",
    "p50k_edit",
    "gpt2",
    "claude",
    "gemini",
    "llama2",
    "llama3",
    "mistral",
]
"""An encoding `estimate_tokens` accepts: a tiktoken encoding or a model family name."""

ENCODINGS: tuple[str, ...] = get_args(EncodingName)
"""The encoding names `estimate_tokens` accepts."""

_BLOB = "https://openaipublic.blob.core.windows.net/"
# Each tiktoken encoding's files and their published SHA-256 (tiktoken_ext.openai_public). A
# cached file with another hash is ignored: tiktoken would re-download it, and we never download.
_P50K = (
    (
        _BLOB + "encodings/p50k_base.tiktoken",
        "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    ),
)
_FILES: dict[str, tuple[tuple[str, str], ...]] = {
    "cl100k_base": (
        (
            _BLOB + "encodings/cl100k_base.tiktoken",
            "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        ),
    ),
    "o200k_base": (
        (
            _BLOB + "encodings/o200k_base.tiktoken",
            "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        ),
    ),
    "p50k_base": _P50K,
    "p50k_edit": _P50K,
    "r50k_base": (
        (
            _BLOB + "encodings/r50k_base.tiktoken",
            "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
        ),
    ),
    "gpt2": (
        (
            _BLOB + "gpt-2/encodings/main/vocab.bpe",
            "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
        ),
        (
            _BLOB + "gpt-2/encodings/main/encoder.json",
            "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
        ),
    ),
}

# Rough token density of each encoding against cl100k for the heuristic (English-like text):
# the SentencePiece vocabularies of Llama 2 and Mistral (32k) split words more finely, Gemini's
# (256k) and Llama 3's (128k, built on cl100k) about as finely as cl100k or less.
_DENSITY: dict[str, float] = {
    "cl100k_base": 1.0,
    "o200k_base": 0.95,
    "p50k_base": 1.12,
    "p50k_edit": 1.12,
    "r50k_base": 1.18,
    "gpt2": 1.18,
    "claude": 1.15,
    "gemini": 0.95,
    "llama2": 1.25,
    "llama3": 1.0,
    "mistral": 1.25,
}

_PIECE = (
    r"(?P<ascii>[A-Za-z]+)"
    r"|(?P<digits>\d{1,3})"
    r"|(?P<cjk>[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\u3040-\u30ff]+)"
    r"|(?P<word>[^\W\d_]+)"
    r"|(?P<space>\s{2,})"
    r"|(?P<punct>[^\w\s]+)"
)

_CHUNK_CHARS = 1 << 20


def _cached_file_is_local(url: str, expected: str) -> bool:
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if cache_dir is None:
        import tempfile  # only to find tiktoken's cache (docs/architecture.md, "Import time")

        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return False
    key = hashlib.sha1(url.encode()).hexdigest()  # tiktoken's cache key
    path = os.path.join(cache_dir, key)
    try:
        with open(path, "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return False
    return digest == expected


def _cached_bpe_is_local(encoding: str) -> bool:
    files = _FILES.get(encoding)
    return files is not None and all(_cached_file_is_local(url, sha) for url, sha in files)


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


@cache
def _pieces() -> re.Pattern[str]:
    """The heuristic's pattern, compiled on the first estimate (not on import)."""
    return re.compile(_PIECE)


def _heuristic(line: str, pieces: re.Pattern[str]) -> int:
    tokens = 0
    for match in pieces.finditer(line):
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

    ``encoding`` must be one of `ENCODINGS`; lines are consumed in one streaming pass. Names
    without local tokenizer data (the model families, or tiktoken without its cached files) are
    estimated.
    """
    encoder = _exact_encoder(encoding)
    if encoder is not None:
        return _exact(lines, encoder)
    total = 0
    breaks = -1
    pieces = _pieces()
    for line in lines:
        breaks += 1
        if line:
            total += _heuristic(line, pieces)
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


estimate_tokens.__module__ = "pipeline.artifacts"

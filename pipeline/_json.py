r"""Canonical JSON and the tool-call checksum.

`canonical_json` writes JSON text byte-for-byte as JavaScript's ``JSON.stringify`` would for the
same data with every object's keys sorted by UTF-16 code units, so checksums computed here agree
with the TypeScript ADK. `tool_call_checksum` is the SHA-256 of that text for ``{"tool", "args"}``.

Two encoders produce the same text:

- a fast path through the stdlib ``json`` C encoder, taken only when a cheap pre-check proves the
  value formats identically there (exact ``dict``/``list``/``tuple`` containers or the frozen
  ones of ``pipeline/_frozen.py``, ASCII keys, ints
  within +-(2**53-1), non-integral floats in ``[1e-4, 1e16)`` whose ``repr`` is JS's plain decimal
  layout, no deep nesting);
- an explicit walk for everything else, which also names the path of a value that is not JSON.

Python strings are read as the UTF-16 code-unit sequences JavaScript would see: a high surrogate
followed by a low surrogate is the character they encode, any other surrogate is lone and written
as ``\udxxx``. The output therefore never holds a raw surrogate and always encodes to UTF-8.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, cast

from ._frozen import FrozenDict, FrozenList

__all__ = ["canonical_json", "tool_call_checksum"]

_MAX_SAFE_INTEGER: Final = 2**53 - 1
_FAST_MAX_DEPTH: Final = 64
"""Deeper values (and cycles) take the explicit walk, which detects cycles."""

_FAST_LEAVES: Final = frozenset({str, bool, type(None)})
_FAST_DICTS: Final = frozenset[type]((dict, FrozenDict))
_FAST_SEQUENCES: Final = frozenset[type]((list, tuple, FrozenList))
"""Containers the C encoder reads as it reads ``dict`` and ``list``: the frozen ones (a record's
arguments) only refuse changes, and the encoder never makes any."""
_FAST_NUMBERS: Final = frozenset({int, float})
_quote_basic: Final[Callable[[str], str]] = json.encoder.encode_basestring
"""The C-accelerated escaper: quote, backslash and control characters only; non-ASCII stays raw."""


def _builtin_sha256() -> Callable[[bytes], Any]:
    """CPython's own SHA-256 (a quarter cheaper per small input than OpenSSL's), else hashlib's.

    The digest is SHA-256 either way; only the implementation differs. The module is
    ``_sha256`` up to Python 3.11 and ``_sha2`` from 3.12; a build without either uses OpenSSL.
    """
    for module in ("_sha2", "_sha256"):
        try:
            found: Callable[[bytes], Any] = importlib.import_module(module).sha256
        except (ImportError, AttributeError):
            continue
        return found
    return hashlib.sha256


_sha256: Final = _builtin_sha256()


def _make_fast_iterencode() -> Callable[[object, int], Iterable[str]]:
    """Build the stdlib encoder once: compact, sorted keys, no NaN, no circular check.

    ``JSONEncoder.encode`` rebuilds its C encoder on every call; building it once (as
    ``JSONEncoder.iterencode`` does, with the same arguments) halves the cost for small values.
    Without the C extension the pure-Python encoder writes the same text.
    """
    make = cast(
        "Callable[..., Callable[[object, int], Iterable[str]]] | None",
        getattr(json.encoder, "c_make_encoder", None),  # private stdlib name, absent on PyPy
    )
    if make is None:
        encoder = json.JSONEncoder(
            ensure_ascii=False,
            check_circular=False,
            allow_nan=False,
            sort_keys=True,
            separators=(",", ":"),
        )
        return encoder.iterencode  # type: ignore[return-value]
        # ^ called as iterencode(value, 0): the second argument is its ``_one_shot`` flag.
    return make(None, None, _quote_basic, None, ":", ",", True, False, False)


_fast_iterencode: Final = _make_fast_iterencode()

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_SURROGATE_OR_PAIR: Final = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")


class _NotJSONError(Exception):
    """Internal: carries the reason and, while unwinding, the path of a non-JSON value."""

    __slots__ = ("reason", "segments")

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.segments: list[str | int] = []


def _fix_surrogate(match: re.Match[str]) -> str:
    text = match.group()
    if len(text) == 2:
        high, low = ord(text[0]), ord(text[1])
        return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    return f"\\u{ord(text):04x}"


def _fix_surrogates(text: str) -> str:
    """Join surrogate pairs and escape lone surrogates in already-escaped JSON text."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE_OR_PAIR.sub(_fix_surrogate, text)


def _quote(text: str) -> str:
    quoted: str = _quote_basic(text)
    if text.isascii():
        return quoted
    return _fix_surrogates(quoted)


def _str_key(item: tuple[str, Any]) -> str:
    return item[0]


def _utf16_key(item: tuple[str, Any]) -> bytes:
    # Big-endian UTF-16 bytes compare exactly like sequences of UTF-16 code units.
    return item[0].encode("utf-16-be", "surrogatepass")


def _js_float(value: float) -> str:
    """Format a float as JavaScript's ``Number.prototype.toString`` does."""
    if value != value or value in (float("inf"), float("-inf")):
        return "null"
    if value == 0.0:
        return "0"  # also -0.0, as JSON.stringify writes it
    text = float.__repr__(value)
    magnitude = -value if value < 0 else value
    if 1e-4 <= magnitude < 1e16:
        # repr uses plain decimal here, as JS does; only integral values differ (".0").
        return text[:-2] if text.endswith(".0") else text
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    # ``point`` is JS's n: value == 0.digits * 10**point.
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    count = len(digits)
    if count <= point <= 21:
        return sign + digits + "0" * (point - count)
    if 0 < point <= 21:
        return f"{sign}{digits[:point]}.{digits[point:]}"
    if -6 < point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    exp = point - 1
    exp_text = f"+{exp}" if exp >= 0 else str(exp)
    if count == 1:
        return f"{sign}{digits}e{exp_text}"
    return f"{sign}{digits[0]}.{digits[1:]}e{exp_text}"


def _js_int(value: int) -> str:
    if -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
        return int.__repr__(value)
    try:
        return _js_float(float(value))  # float() rounds to the nearest double, as JS does
    except OverflowError:
        return "null"  # beyond the double range JS holds Infinity, which JSON writes as null


def _fast_number(item: int | float) -> bool:
    if type(item) is int:
        return -_MAX_SAFE_INTEGER <= item <= _MAX_SAFE_INTEGER
    # Non-integral floats in [1e-4, 1e16): repr writes JS's plain decimal digits.
    return 1e-4 <= abs(item) < 1e16 and not item.is_integer()  # type: ignore[union-attr]
    # ^ mypy does not narrow through ``type(item) is int``; ``item`` is a float here.


def _is_fast(value: object, depth: int) -> bool:
    """Return True when the stdlib encoder provably writes ``value`` as JavaScript would."""
    if depth >= _FAST_MAX_DEPTH:
        return False
    kind = type(value)
    if kind in _FAST_DICTS:
        items: Iterable[object] = value.values()  # type: ignore[attr-defined]
        for key in value:  # type: ignore[attr-defined]
            if type(key) is not str or not key.isascii():
                return False
    elif kind in _FAST_SEQUENCES:
        items = value  # type: ignore[assignment]
    else:
        return kind in _FAST_LEAVES or (kind in _FAST_NUMBERS and _fast_number(value))  # type: ignore[arg-type]
    for item in items:
        kind = type(item)
        if kind in _FAST_LEAVES:
            continue
        if kind in _FAST_NUMBERS:
            if not _fast_number(item):  # type: ignore[arg-type]
                return False
        elif not _is_fast(item, depth + 1):
            return False
    return True


def _bool_text(value: bool) -> str:
    return "true" if value else "false"


def _null_text(value: None) -> str:
    return "null"


_SCALAR_WRITERS: Final[dict[type, Callable[[Any], str]]] = {
    str: _quote,
    int: _js_int,
    float: _js_float,
    bool: _bool_text,
    type(None): _null_text,
}
"""Writers for the exact scalar types; subclasses go through `_walk`'s isinstance checks."""


def _walk(value: object, out: list[str], active: set[int]) -> None:
    """Append the canonical text of ``value`` to ``out``; raise `_NotJSONError` if not JSON."""
    writer = _SCALAR_WRITERS.get(type(value))
    if writer is not None:
        out.append(writer(value))
    elif isinstance(value, Mapping):
        _walk_mapping(value, out, active)
    elif isinstance(value, list | tuple):
        _walk_array(value, out, active)
    elif isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, int):  # bool cannot be subclassed, so this is a true int subclass
        out.append(_js_int(value))
    elif isinstance(value, float):
        out.append(_js_float(value))
    else:
        raise _NotJSONError(f"{type(value).__name__} is not JSON data")


def _walk_mapping(value: Mapping[Any, Any], out: list[str], active: set[int]) -> None:
    marker = id(value)
    if marker in active:
        raise _NotJSONError("circular reference")
    items = list(value.items())
    ascii_keys = True
    for key, _ in items:
        if type(key) is not str:
            if not isinstance(key, str):
                raise _NotJSONError(f"object key {key!r} ({type(key).__name__}) is not a string")
            key = str.__str__(key)
        if not key.isascii():
            ascii_keys = False
    items.sort(key=_str_key if ascii_keys else _utf16_key)
    active.add(marker)
    out.append("{")
    writers = _SCALAR_WRITERS
    first = True
    for key, item in items:
        if first:
            first = False
            out.append(_quote(key))
        else:
            out.append("," + _quote(key))
        out.append(":")
        writer = writers.get(type(item))
        if writer is not None:
            out.append(writer(item))
            continue
        try:
            _walk(item, out, active)
        except _NotJSONError as exc:
            exc.segments.append(key)
            raise
    out.append("}")
    active.discard(marker)


def _walk_array(value: list[Any] | tuple[Any, ...], out: list[str], active: set[int]) -> None:
    marker = id(value)
    if marker in active:
        raise _NotJSONError("circular reference")
    active.add(marker)
    out.append("[")
    writers = _SCALAR_WRITERS
    for index, item in enumerate(value):
        if index:
            out.append(",")
        writer = writers.get(type(item))
        if writer is not None:
            out.append(writer(item))
            continue
        try:
            _walk(item, out, active)
        except _NotJSONError as exc:
            exc.segments.append(index)
            raise
    out.append("]")
    active.discard(marker)


def _format_path(segments: list[str | int]) -> str:
    parts = ["$"]
    for segment in segments:
        if isinstance(segment, int):
            parts.append(f"[{segment}]")
        elif segment.isidentifier():
            parts.append(f".{segment}")
        else:
            parts.append(f"[{_quote(segment)}]")
    return "".join(parts)


def _encode(value: object, root: tuple[str, ...]) -> str:
    if _is_fast(value, 0):
        text = "".join(_fast_iterencode(value, 0))
        return text if text.isascii() else _fix_surrogates(text)
    out: list[str] = []
    try:
        _walk(value, out, set())
    except _NotJSONError as exc:
        path = _format_path([*root, *reversed(exc.segments)])
        raise TypeError(f"canonical_json: value at {path}: {exc.reason}") from None
    return "".join(out)


def canonical_json(value: Any) -> str:
    r"""Return the canonical JSON text of ``value``.

    The text is what JavaScript's ``JSON.stringify`` writes for the same data once every
    object's keys are sorted by UTF-16 code units: no whitespace, JS number formatting (``1.0``
    -> ``1``, ``-0.0`` -> ``0``, ``1e-7``, ``1e+21``, NaN and infinities -> ``null``, ints
    beyond +-(2**53-1) as their nearest double), and JS string escaping (only ``"``, ``\`` and
    control characters; non-ASCII raw; lone surrogates as ``\udxxx``).

    JSON data is ``None``, ``bool``, ``int``, ``float``, ``str`` (subclasses such as enums are
    written by value), lists and tuples of JSON data, and mappings with ``str`` keys.

    Args:
        value: The JSON data to write.

    Returns:
        The canonical text; it always encodes to UTF-8.

    Raises:
        TypeError: ``value`` holds something that is not JSON data (a set, bytes, a datetime,
            an object, a non-``str`` key, a circular reference); the message names its path,
            e.g. ``$.items[2]``.
    """
    return _encode(value, ())


def tool_call_checksum(tool: str, args: Mapping[str, Any]) -> str:
    """Return the checksum that identifies a tool call by its tool name and raw arguments.

    It is the lowercase hex SHA-256 of the UTF-8 bytes of
    ``canonical_json({"tool": tool, "args": args})``. Identical (tool, args) pairs collide by
    design: that is what repetition detection counts. Pass the arguments exactly as the model
    sent them (before validation and defaults); arguments that are JSON but not an object are
    hashed too, so malformed model output still gets a stable checksum.

    Args:
        tool: The tool name.
        args: The raw arguments.

    Returns:
        64 lowercase hex digits.

    Raises:
        TypeError: ``tool`` is not a string, or ``args`` holds something that is not JSON data;
            the message names its path, e.g. ``$.args.when``.
    """
    if not isinstance(tool, str):
        raise TypeError(
            f"canonical_json: value at $.tool: {type(tool).__name__} is not a str tool name"
        )
    if _is_fast(args, 1):  # `_encode` and `_quote` inline: the hot path of every call
        body = "".join(_fast_iterencode(args, 0))
        text = '{"args":' + body + ',"tool":' + _quote_basic(tool) + "}"
        if not text.isascii():  # the delimiters are ASCII: no pair can span two parts
            text = _fix_surrogates(text)
    else:
        text = '{"args":' + _encode(args, ("args",)) + ',"tool":' + _quote(tool) + "}"
    digest: str = _sha256(text.encode("utf-8")).hexdigest()
    return digest


canonical_json.__module__ = "pipeline"
tool_call_checksum.__module__ = "pipeline"

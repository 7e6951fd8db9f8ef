"""Reading a proposed call's arguments: the provider's JSON text (or a parsed object) as a dict.

`parse_arguments` is the loop's one argument parser. Text is decoded with
``JSONDecoder.raw_decode`` (``json.loads`` without its two Python frames, with the same "extra
data" rule); a mapping a model seam already parsed is copied as JSON data. Anything that is not
a JSON object raises `InvalidToolArgsError` with the sentence the model reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from math import isfinite
from typing import Any, Final

from ..errors import InvalidToolArgsError

__all__ = [
    "NAME_ECHO",
    "UNNAMED",
    "json_kind",
    "parse_arguments",
    "shown_name",
]

UNNAMED: Final = "(unnamed)"
"""The tool name stored for a proposed call that named no tool."""

NAME_ECHO: Final = 64
"""How much of a proposed tool name a record or an error text keeps (a tool name is at most 64
characters, so only a name no tool can have is cut: a 1 MB name must not come back whole)."""

_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
"""The exact types of JSON scalars as ``json.loads`` gives them (no subclasses)."""
_JSON_SPACE: Final = " \t\n\r"


class _NotFinite(ValueError):
    """A number the arguments spell that is not a finite double (``NaN``, ``1e999``)."""


def _finite(text: str) -> float:
    value = float(text)
    if not isfinite(value):
        raise _NotFinite(text)
    return value


def _no_constant(text: str) -> float:
    raise _NotFinite(text)


_decode: Final = json.JSONDecoder(parse_float=_finite, parse_constant=_no_constant).raw_decode
"""``json.loads`` without its frames, refusing what JSON has no number for (``NaN``,
``Infinity``, a literal past the double range): Python would read them as ``nan`` and ``inf``,
which a handler would get and an audit row would write as ``null``."""


def shown_name(name: str) -> str:
    """``name`` as records and error texts show it: cut to `NAME_ECHO` characters and ``...``."""
    return name if len(name) <= NAME_ECHO else name[:NAME_ECHO] + "..."


def parse_arguments(name: str, arguments: object) -> dict[str, Any]:
    """Return the arguments of a call to ``name`` as a fresh dict of JSON data.

    ``arguments`` is the JSON text a provider sent (blank text and None mean ``{}``) or a
    mapping a model seam parsed already.

    Raises:
        InvalidToolArgsError: the text is not JSON, holds something other than one object, is
            nested too deeply, or the mapping is not JSON data.
    """
    if type(arguments) is str:
        text = arguments
    elif arguments is None:  # a provider's ``null`` for a call without arguments
        return {}
    elif isinstance(arguments, Mapping):
        if type(arguments) is dict and all(
            type(key) is str
            and type(value) in _SCALARS
            and (type(value) is not float or isfinite(value))
            for key, value in arguments.items()
        ):
            return dict(arguments)  # flat JSON scalars: what the JSON round trip would give
        try:
            text = json.dumps(dict(arguments), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise _invalid(name, f"are not JSON data ({exc})") from None
        except RecursionError:
            raise _too_deep(name) from None
    else:
        text = str(arguments)
    try:
        args, end = _decode(text)
    except RecursionError:
        raise _too_deep(name) from None
    except _NotFinite as exc:
        raise _invalid(name, f"hold {exc}, which is not a JSON number") from None
    except json.JSONDecodeError as exc:
        start = len(text) - len(text.lstrip(_JSON_SPACE))  # leading space, as json.loads allows
        if start == len(text):
            return {}
        if start == 0:
            raise _not_json(name, exc) from None
        try:
            args, end = _decode(text, start)
        except RecursionError:
            raise _too_deep(name) from None
        except _NotFinite as exc:
            raise _invalid(name, f"hold {exc}, which is not a JSON number") from None
        except json.JSONDecodeError as again:
            raise _not_json(name, again) from None
    if end != len(text) and text[end:].strip(_JSON_SPACE):
        raise _not_json(name, json.JSONDecodeError("Extra data", text, end))
    if type(args) is not dict:
        raise InvalidToolArgsError(
            f"the arguments for {shown_name(name)!r} must be a JSON object, got {json_kind(args)}.",
            tool_name=shown_name(name),
        )
    return args


def _invalid(name: str, what: str) -> InvalidToolArgsError:
    shown = shown_name(name)
    return InvalidToolArgsError(
        f"the arguments for {shown!r} {what}; send a JSON object.", tool_name=shown
    )


def _not_json(name: str, exc: json.JSONDecodeError) -> InvalidToolArgsError:
    return _invalid(name, f"are not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})")


def _too_deep(name: str) -> InvalidToolArgsError:
    return _invalid(name, "are nested too deeply")


def json_kind(value: object) -> str:
    """Name a parsed JSON value's kind for an error message (``"an array"``, ``"null"``, ...)."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


"""Terminal styling for the ``loopware`` command: ANSI colour on a terminal, plain text otherwise.

Colour is used only when the stream is a TTY, ``NO_COLOR`` is unset or empty
(https://no-color.org), ``TERM`` is not ``dumb`` and the user did not pass ``--plain``. Output is
ASCII either way, so it survives any terminal encoding and any pipe.
"""

from __future__ import annotations

import os
from typing import Final, TextIO

__all__ = ["Style"]

_CODES: Final = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}

_VERDICT_COLOURS: Final = {
    "allowed": "green",
    "approved": "green",
    "ok": "green",
    "yes": "green",
    "answered": "green",
    "warned": "yellow",
    "hidden": "yellow",
    "withdrawn": "yellow",
    "denied": "red",
    "rejected": "red",
    "invalid": "red",
    "failed": "red",
    "aborted": "red",
    "no": "red",
    "not_run": "dim",
    "not reached": "dim",
}


class Style:
    """Wraps text in ANSI colour codes when enabled; returns it unchanged otherwise."""

    __slots__ = ("enabled",)

    def __init__(self, enabled: bool) -> None:
        """Create a style; ``enabled=False`` is plain text."""
        self.enabled = enabled

    def __repr__(self) -> str:
        """Show whether colour is on."""
        return f"Style(enabled={self.enabled})"

    @classmethod
    def for_stream(cls, stream: TextIO, *, plain: bool = False) -> Style:
        """Colour for ``stream`` when it is a terminal and nothing asks for plain output."""
        if plain or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
            return cls(False)
        isatty = getattr(stream, "isatty", None)
        try:
            return cls(bool(isatty()) if callable(isatty) else False)
        except ValueError:  # a closed stream
            return cls(False)

    def paint(self, text: str, *styles: str) -> str:
        """Return ``text`` in the named styles (``bold``, ``dim``, ``red``, ``green``...)."""
        if not self.enabled or not styles:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def verdict(self, text: str, *, key: str | None = None) -> str:
        """Colour a verdict or status word by what it means (red for denied, ...)."""
        colour = _VERDICT_COLOURS.get(key if key is not None else text)
        if colour is None:
            return text
        return self.paint(text, colour) if colour == "dim" else self.paint(text, colour, "bold")

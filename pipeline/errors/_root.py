"""`LoopError`, the root of the one exception tree (drawn in ``pipeline/errors/__init__.py``)."""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["LoopError"]


_RESERVED = frozenset({"code", "status", "fatal", "message", "default_message"})
"""Attributes a context keyword may not overwrite."""


class LoopError(Exception):
    """Root of every loopware error.

    Attributes:
        code: Stable machine-readable code, always starting with ``E_``.
        status: HTTP-like status number.
        fatal: True for developer errors that no retry can fix.
        message: The human-readable message (without the code prefix).
    """

    code: ClassVar[str] = "E_LOOP_ERROR"
    status: ClassVar[int] = 500
    fatal: ClassVar[bool] = False
    default_message: ClassVar[str] = "loopware error"
    message: str

    def __init__(self, message: str | None = None, **context: Any) -> None:
        """Build the error; every keyword in ``context`` becomes an attribute.

        Raises:
            TypeError: a context keyword would shadow ``code``, ``status``, ``fatal``,
                ``message`` or ``default_message`` (they are the error's stable identity).
        """
        if not _RESERVED.isdisjoint(context):
            clash = sorted(_RESERVED.intersection(context))
            raise TypeError(f"{type(self).__name__}: context keywords {clash} are reserved")
        self.message = message if message is not None else self.default_message
        for key, value in context.items():
            setattr(self, key, value)
        super().__init__(self.message)

    def __str__(self) -> str:
        """Return ``"CODE: message"``."""
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        """Return a constructor-like representation."""
        return f"{type(self).__name__}({self.message!r})"

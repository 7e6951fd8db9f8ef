"""Approval gates: a point in a turn that waits until someone settles it.

docs/concepts/persistence.md, "Approval gates", shows them in use.

A `Gate` is settled exactly once, by ``resolve(value)``, ``reject(error)``, ``abort(reason)`` or
by its timeout running out; settling again is a no-op. ``await gate.wait()`` returns the resolved
value or raises the matching error. Settling may happen before anyone waits (a `GateOpened`
listener that approves at once), and every later ``wait()`` sees the same outcome.

A gate is generic in what it resolves to: ``Gate(..., schema=Approval)`` is a ``Gate[Approval]``
whose ``await gate.wait()`` is typed ``Approval``; without a schema it is a ``Gate[Any]``.

Gates are meant to be waited on through ``ctx.wait_for(gate)``, which emits `GateOpened` and
`GateClosed` and aborts the gate when its turn is aborted. Settle a gate from the event loop's
thread (use ``loop.call_soon_threadsafe(gate.resolve, value)`` from another thread).
"""

from __future__ import annotations

import asyncio
import contextvars
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, cast, overload

from typing_extensions import TypeVar

from .errors import (
    GateAbortedError,
    GateTimeoutError,
    InvalidGateError,
    InvalidGateResolutionError,
    LoopError,
    PolicyViolationError,
)

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = ["GATE_WATCHER", "Gate", "GateResult"]

GateResult = Literal["resolved", "rejected", "aborted", "timeout"]
"""How a gate was settled."""

_REJECTION_POLICY = "approval"

T = TypeVar("T", default=Any)
"""What the gate resolves to; ``Any`` for a gate without a schema (and for a bare ``Gate``)."""


class Gate(Generic[T]):
    """A one-shot approval point: ``await ctx.wait_for(Gate(id=..., reason=...))``.

    Args:
        id: A non-empty identifier, unique among the turn's open gates.
        reason: A non-empty, human-readable reason shown to whoever settles it.
        payload: Any data the approver needs (the tool and arguments, for `ApprovalGate`).
        schema: When given, ``resolve(value)`` validates ``value`` against it (anything a pydantic
            `TypeAdapter` accepts: a model class, ``bool``, a ``Literal``, a TypedDict...) and
            ``wait()`` returns the validated value. A class (``schema=Approval``, ``schema=int``)
            makes the gate a ``Gate[Approval]``, ``Gate[int]``; a special form mypy cannot take as
            a class (``Literal[...]``, ``int | None``) gives a ``Gate[Any]`` unless you write the
            type yourself: ``Gate[Literal["yes", "no"]](..., schema=Literal["yes", "no"])``.
        timeout: Seconds ``wait()`` waits before the gate times out; ``None`` waits forever.
            The clock starts when ``wait()`` is first awaited.

    Raises:
        InvalidGateError: A part is malformed (the message names it).

    Rejections: ``wait()`` raises the `LoopError` given to ``reject``. Text (or nothing) becomes
    a `PolicyViolationError` with ``policy="approval"`` and ``details={"gate_id": ...}``; any
    other exception is wrapped the same way, chained as its ``__cause__``.
    """

    __slots__ = (
        "_adapter",
        "_done",
        "_error",
        "_id",
        "_payload",
        "_reason",
        "_result",
        "_schema",
        "_timeout",
        "_value",
    )

    @overload
    def __init__(
        self,
        *,
        id: str,
        reason: str,
        payload: Any = None,
        schema: type[T] | None = None,
        timeout: float | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        *,
        id: str,
        reason: str,
        payload: Any = None,
        schema: object,
        timeout: float | None = None,
    ) -> None: ...

    def __init__(
        self,
        *,
        id: str,
        reason: str,
        payload: Any = None,
        schema: Any = None,
        timeout: float | None = None,
    ) -> None:
        """Build and validate the gate (see the class docstring)."""
        if not _is_text(id):
            raise InvalidGateError(f"gate id must be a non-empty string, got {id!r}", field="id")
        if not _is_text(reason):
            raise InvalidGateError(
                f"gate reason must be a non-empty string, got {reason!r}", field="reason"
            )
        if timeout is not None and not _is_positive_seconds(timeout):
            raise InvalidGateError(
                f"gate timeout must be a positive number of seconds or None, got {timeout!r}",
                field="timeout",
            )
        adapter: TypeAdapter[Any] | None = None
        if schema is not None:
            from pydantic import TypeAdapter  # lazily: docs/architecture.md, "Import time"

            try:
                adapter = TypeAdapter(schema)
            except Exception as exc:  # pydantic raises several types for unusable schemas
                raise InvalidGateError(
                    f"gate schema {schema!r} is not a type pydantic can validate: {exc}",
                    field="schema",
                ) from exc
        self._id = id
        self._reason = reason
        self._payload = payload
        self._schema = schema
        self._adapter = adapter
        self._timeout = None if timeout is None else float(timeout)
        self._result: GateResult | None = None
        self._value: T | None = None
        self._error: LoopError | None = None
        # asyncio.Event binds to a loop on first wait, so a gate can be built outside a loop.
        self._done = asyncio.Event()

    def __repr__(self) -> str:
        """Show the id, the reason and the state."""
        state = self._result or "open"
        return f"Gate(id={self._id!r}, reason={self._reason!r}, state={state!r})"

    @property
    def id(self) -> str:
        """The gate's identifier."""
        return self._id

    @property
    def reason(self) -> str:
        """Why the gate exists, for whoever settles it."""
        return self._reason

    @property
    def payload(self) -> Any:
        """The data given to the approver."""
        return self._payload

    @property
    def schema(self) -> Any:
        """The type resolutions are validated against (as given), or ``None``."""
        return self._schema

    @property
    def timeout(self) -> float | None:
        """Seconds ``wait()`` waits before timing out, or ``None``."""
        return self._timeout

    @property
    def is_settled(self) -> bool:
        """True once the gate was resolved, rejected, aborted or timed out."""
        return self._result is not None

    @property
    def result(self) -> GateResult | None:
        """How the gate was settled, or ``None`` while it is open."""
        return self._result

    @property
    def value(self) -> T | None:
        """The resolved (validated) value; ``None`` unless the gate was resolved."""
        return self._value

    @property
    def error(self) -> LoopError | None:
        """The error ``wait()`` raises; ``None`` while open or when resolved."""
        return self._error

    def resolve(self, value: Any = None) -> bool:
        """Settle the gate with ``value``; return False (a no-op) if it was already settled.

        With a schema, ``value`` is validated and converted (a dict becomes the model), so it
        may be anything the schema accepts; ``wait()`` then returns the converted ``T``.

        Raises:
            InvalidGateResolutionError: ``value`` fails the gate's schema; the gate stays open.
        """
        if self._result is not None:
            return False
        if self._adapter is not None:
            from pydantic_core import ValidationError  # loaded with the adapter

            try:
                value = self._adapter.validate_python(value)
            except ValidationError as exc:
                raise InvalidGateResolutionError(
                    f"resolution of gate {self._id!r} failed its schema: {exc}",
                    gate_id=self._id,
                    errors=[dict(item) for item in exc.errors(include_url=False)],
                ) from exc
        self._value = value
        self._settle("resolved", None)
        return True

    def reject(self, error: BaseException | str | None = None) -> bool:
        """Settle the gate as rejected; return False (a no-op) if it was already settled.

        Args:
            error: The `LoopError` ``wait()`` raises; text, another exception or nothing becomes
                a `PolicyViolationError` (``policy="approval"``).
        """
        if self._result is not None:
            return False
        if isinstance(error, LoopError):
            failure: LoopError = error
        else:
            if error is None:
                text = f"gate {self._id!r} was rejected"
            elif isinstance(error, str):
                text = error
            else:
                text = f"gate {self._id!r} was rejected: {error}"
            failure = PolicyViolationError(
                text, policy=_REJECTION_POLICY, details={"gate_id": self._id}
            )
            if isinstance(error, BaseException):
                failure.__cause__ = error
        self._settle("rejected", failure)
        return True

    def abort(self, reason: str | None = None) -> bool:
        """Settle the gate as aborted; return False (a no-op) if it was already settled."""
        if self._result is not None:
            return False
        text = f"gate {self._id!r} was aborted" + (f": {reason}" if reason else "")
        self._settle("aborted", GateAbortedError(text, gate_id=self._id, reason=reason))
        return True

    async def wait(self) -> T:
        """Wait until the gate is settled; return the resolved value.

        Raises:
            LoopError: The rejection error (see the class docstring).
            GateAbortedError: The gate (or its turn) was aborted.
            GateTimeoutError: ``timeout`` seconds passed first; the gate is then settled as
                ``"timeout"``.
        """
        if self._result is None:
            try:
                async with asyncio.timeout(self._timeout):
                    await self._done.wait()
            except TimeoutError:
                if self._result is None:
                    self._settle(
                        "timeout",
                        GateTimeoutError(
                            f"gate {self._id!r} was not settled within {self._timeout:g}s",
                            gate_id=self._id,
                            timeout=self._timeout,
                        ),
                    )
        if self._error is not None:
            raise self._error
        # Resolved: the value passed the schema (or there is none and T is Any), so it is a T.
        return cast("T", self._value)

    def _settle(self, result: GateResult, error: LoopError | None) -> None:
        self._result = result
        self._error = error
        self._done.set()


def _is_text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _is_positive_seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


Gate.__module__ = "pipeline"


GATE_WATCHER: Final[contextvars.ContextVar[Callable[[Gate[Any]], None] | None]] = (
    contextvars.ContextVar("loopware_gate_watcher", default=None)
)
"""Told of each gate a stage opens in this context, before it waits and before `GateOpened` is
emitted: a hosted call that carries its host's decision settles the gate with it, or defers
the call (``pipeline/hosted/_turn.py``). Unset, nobody is told."""

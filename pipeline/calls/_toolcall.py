"""`ToolCall`: the frozen record of one completed (or failed) tool call, and its constructor.

A record says what was asked (``tool``, ``args``, ``checksum``), what happened (``results``,
``is_error``), whether the handler ran (``ran``) and for how long (``duration_ms``), and every
decision taken about the call (``decisions``, see `Decision`); ``verdict`` reads them into one
word. The loop builds every record it stores with `build_record`, from the call's run
(``pipeline/calls/_run.py``).

``id`` and ``checksum`` are different things: ``id`` names the call (the provider's call id, or
`ToolCall.new_id`; it keys the call's artifact), ``checksum`` names what was asked (the SHA-256
of the tool name and raw arguments, see `tool_call_checksum`; identical requests share it, which
is what repetition detection counts).

The arguments are stored read-only all the way down: ``args`` is a ``dict`` subclass (and
nested lists a ``list`` subclass) whose mutating methods raise `TypeError`. It compares equal to
plain data, serialises with ``json.dumps`` and validates with pydantic; it is never changed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, NoReturn, TypeAlias

from .._frozen import FrozenDict, freeze_json, slot_setters
from .._json import tool_call_checksum
from ..artifacts._artifact import SpooledArtifact
from ..artifacts._media import Media
from ..errors import InvalidToolCallError
from ._decision import Decision, Verdict, verdict

__all__ = ["ToolCall", "ToolCallResults", "build_record"]

ToolCallResults: TypeAlias = (
    str | SpooledArtifact | Media | tuple[Media, ...] | tuple[SpooledArtifact, ...]
)
"""What a completed call produced: text, one artifact, one media item, or a non-empty tuple of
media items or of artifacts."""

_CHECKSUM: Final = re.compile(r"[0-9a-f]{64}")


def _now() -> datetime:
    return datetime.now(UTC)


def _bad(field_name: str, problem: str) -> NoReturn:
    raise InvalidToolCallError(f"invalid ToolCall {field_name}: {problem}", field=field_name)


def _parse_args(args: object) -> Mapping[str, Any]:
    """Return the arguments as a mapping: a JSON-object string is parsed."""
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except ValueError as exc:
            _bad("args", f"not valid JSON: {exc}")
        except RecursionError:
            _bad("args", "JSON text nested too deeply")
        if not isinstance(parsed, dict):
            _bad("args", f"JSON text must hold an object, not {type(parsed).__name__}")
        return parsed
    if not isinstance(args, Mapping):
        _bad("args", f"must be a mapping or a JSON-object string, not {type(args).__name__}")
    return args


def _freeze_args(args: object) -> FrozenDict:
    if type(args) is FrozenDict:
        return args
    return _freeze_mapping(_parse_args(args))


def _freeze_mapping(args: Mapping[str, Any]) -> FrozenDict:
    try:
        frozen: FrozenDict = freeze_json(args, "args")
    except TypeError as exc:
        _bad("args", str(exc))
    except RecursionError:
        _bad("args", "nested too deeply (or circular)")
    return frozen


def _check_results(results: object) -> tuple[Media, ...] | tuple[SpooledArtifact, ...] | None:
    """Check ``results``; return the tuple to store when a list was given, else None."""
    if type(results) is str or isinstance(results, str | SpooledArtifact | Media):
        return None
    if not isinstance(results, list | tuple):
        _bad(
            "results",
            "must be a str, a SpooledArtifact, a Media, or a non-empty list/tuple of Media or "
            f"of SpooledArtifact, not {type(results).__name__}",
        )
    if not results:
        _bad("results", "a sequence of results must not be empty")
    kind = Media if isinstance(results[0], Media) else SpooledArtifact
    for index, item in enumerate(results):
        if not isinstance(item, kind):
            _bad(
                "results",
                f"a sequence of results must be all Media or all SpooledArtifact; item {index} "
                f"is {type(item).__name__}",
            )
    return None if type(results) is tuple else tuple(results)


def _check_time(field_name: str, value: object, *, optional: bool = False) -> None:
    if type(value) is datetime and value.tzinfo is UTC:  # the common case, cheaply
        return
    if value is None and optional:
        return
    if not isinstance(value, datetime):
        _bad(field_name, f"must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        _bad(field_name, "must be timezone-aware (naive datetimes are ambiguous)")


def _check_flag(field_name: str, value: object) -> None:
    if type(value) is not bool:
        _bad(field_name, f"must be a bool, not {type(value).__name__}")


def _check_decisions(call: ToolCall) -> None:
    decisions: object = call.decisions
    if type(decisions) is not tuple:
        if not isinstance(decisions, list | tuple):
            _bad("decisions", f"must be a tuple of Decision, not {type(decisions).__name__}")
        decisions = tuple(decisions)
        object.__setattr__(call, "decisions", decisions)
    for index, item in enumerate(decisions):
        if not isinstance(item, Decision):
            _bad("decisions", f"item {index} is {type(item).__name__}, not a Decision")


def _check_duration(value: object) -> None:
    if value is None or (type(value) is float and value >= 0.0):
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        _bad("duration_ms", f"must be a non-negative number or None, got {value!r}")


def _check_text(field_name: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        _bad(field_name, f"must be a non-empty string, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """The frozen record of one completed (or failed) tool call.

    Build one with `ToolCall.completed`, which fills the checksum and timestamps, or with every
    field by keyword. A list of results is stored as a tuple; the arguments are stored
    read-only (see the module docs).

    Raises:
        InvalidToolCallError: a field is bad; ``field`` names it.
    """

    id: str
    """The provider's call id, or a generated one (`ToolCall.new_id`); keys the call's artifact."""
    tool: str
    """The name of the tool that was called (possibly unknown to the registry)."""
    args: Mapping[str, Any]
    """The raw arguments as the model sent them; read-only. A JSON-object string is parsed."""
    checksum: str
    """64 lowercase hex digits: `tool_call_checksum` of ``tool`` and the raw ``args``."""
    is_complete: bool
    """True once the call finished (successfully or not); then ``completed_at`` is set."""
    is_error: bool
    """True when the call failed; ``results`` then holds the message the model reads."""
    results: ToolCallResults
    """What the call produced (lists are stored as tuples; sequences are non-empty and all
    `Media` or all `SpooledArtifact`)."""
    from_artifact_tool: bool = False
    """True when the call was made through a forged artifact query tool."""
    inline: bool = False
    """True to show an artifact result to the model whole rather than as a handle."""
    ran: bool = False
    """True when the handler ran for this call (whatever its outcome); False when the call
    was refused, answered or failed before it (see ``decisions`` for why)."""
    decisions: tuple[Decision, ...] = ()
    """Every decision taken about the call, in order (see `Decision`)."""
    duration_ms: float | None = None
    """How long the handler ran, in milliseconds (None when it did not run)."""
    validated_checksum: str | None = None
    """`tool_call_checksum` of the tool name and the *validated* arguments (defaults applied,
    canonical JSON), when a policy compared calls by it (`RepetitionDetector` does); None
    otherwise. Two calls that differ only by spelling out a default share it."""
    unparsed_args: str | None = None
    """The arguments text exactly as the model sent it, when it was not a JSON object (the call
    was refused as invalid and ``args`` is empty); the provider models show the model this text
    as what it sent. None otherwise."""
    created_at: datetime = field(default_factory=_now)
    """When the record was created (timezone-aware)."""
    updated_at: datetime = field(default_factory=_now)
    """When the record last changed (timezone-aware)."""
    completed_at: datetime | None = None
    """When the call finished (timezone-aware); set exactly when ``is_complete`` is True."""

    def __post_init__(self) -> None:
        """Check every field; parse and freeze ``args``; turn a results list into a tuple."""
        _check_text("id", self.id)
        _check_text("tool", self.tool)
        args: object = self.args
        if type(args) is not FrozenDict:
            object.__setattr__(self, "args", _freeze_args(args))
        checksum: object = self.checksum
        if not isinstance(checksum, str) or _CHECKSUM.fullmatch(checksum) is None:
            _bad("checksum", f"must be 64 lowercase hex digits, got {checksum!r}")
        _check_flag("is_complete", self.is_complete)
        _check_flag("is_error", self.is_error)
        _check_flag("from_artifact_tool", self.from_artifact_tool)
        _check_flag("inline", self.inline)
        _check_flag("ran", self.ran)
        _check_decisions(self)
        _check_duration(self.duration_ms)
        vchecksum: object = self.validated_checksum
        if vchecksum is not None and (
            not isinstance(vchecksum, str) or _CHECKSUM.fullmatch(vchecksum) is None
        ):
            _bad("validated_checksum", f"must be 64 hex digits or None, got {vchecksum!r}")
        unparsed: object = self.unparsed_args
        if unparsed is not None and not isinstance(unparsed, str):
            _bad("unparsed_args", f"must be the text the model sent or None, got {unparsed!r}")
        results = _check_results(self.results)
        if results is not None:
            object.__setattr__(self, "results", results)
        _check_time("created_at", self.created_at)
        _check_time("updated_at", self.updated_at)
        _check_time("completed_at", self.completed_at, optional=True)
        if self.is_complete != (self.completed_at is not None):
            _bad(
                "completed_at",
                "must be set when is_complete is True and None when it is False",
            )

    def __hash__(self) -> int:
        """Hash by ``id`` and ``checksum``, so records work in sets and as keys.

        (The generated hash would fail on the read-only ``args`` dict; equal records share
        ``id`` and ``checksum``, so this agrees with ``==``.)
        """
        return hash((self.id, self.checksum))

    @property
    def verdict(self) -> Verdict:
        """The one word for the call (see `pipeline.calls.verdict`).

        The deciding decision's action, else ``"allowed"`` when the handler ran.
        """
        return verdict(self.decisions, self.ran)

    @property
    def deciding(self) -> Decision | None:
        """The decision the verdict comes from, or None when no decision was taken."""
        word = self.verdict
        for decision in reversed(self.decisions):
            if decision.action == word:
                return decision
        return None

    @classmethod
    def completed(
        cls,
        *,
        id: str,
        tool: str,
        args: Mapping[str, Any] | str,
        results: ToolCallResults | list[Media] | list[SpooledArtifact],
        is_error: bool = False,
        from_artifact_tool: bool = False,
        inline: bool = False,
        ran: bool | None = None,
        decisions: tuple[Decision, ...] = (),
        duration_ms: float | None = None,
    ) -> ToolCall:
        """Build the record of a finished call: checksum over the raw args, timestamps now.

        Args:
            id: The provider's call id, or `ToolCall.new_id`.
            tool: The tool name.
            args: The raw arguments (a mapping, or JSON text of an object).
            results: What the call produced (a list is stored as a tuple).
            is_error: True when the call failed.
            from_artifact_tool: True for calls made through an artifact query tool.
            inline: True to show an artifact result whole.
            ran: Whether the handler ran; None (the default) means ``not is_error`` (a result
                came from somewhere; an error record of your own says nothing ran).
            decisions: The decisions taken about the call.
            duration_ms: How long the handler ran.

        Raises:
            InvalidToolCallError: a part is bad; ``field`` names it.
        """
        raw = _parse_args(args)
        frozen = _freeze_mapping(raw)
        _check_text("tool", tool)
        try:
            checksum = tool_call_checksum(tool, raw)  # raw args are JSON: freezing checked them
        except RecursionError:
            _bad("args", "nested too deeply")
        now = datetime.now(UTC)
        return cls(
            id=id,
            tool=tool,
            args=frozen,
            checksum=checksum,
            is_complete=True,
            is_error=is_error,
            results=results,  # type: ignore[arg-type]  # a list is checked and made a tuple
            from_artifact_tool=from_artifact_tool,
            inline=inline,
            ran=not is_error if ran is None else ran,
            decisions=tuple(decisions),
            duration_ms=duration_ms,
            created_at=now,
            updated_at=now,
            completed_at=now,
        )

    @staticmethod
    def new_id() -> str:
        """Return a fresh call id: ``"call_"`` and 32 hex digits (128 random bits)."""
        return "call_" + os.urandom(16).hex()  # not uuid4: ``uuid`` imports ``platform``


_RECORD_SETTERS: Final = slot_setters(
    ToolCall,
    *("id", "tool", "args", "checksum", "is_complete", "is_error", "results"),
    *("from_artifact_tool", "inline", "ran", "decisions", "duration_ms", "validated_checksum"),
    *("unparsed_args", "created_at", "updated_at", "completed_at"),
)


def build_record(
    id: str,
    tool: str,
    args: Mapping[str, Any],
    checksum: str,
    results: ToolCallResults,
    is_error: bool = False,
    from_artifact_tool: bool = False,
    inline: bool = False,
    ran: bool = False,
    decisions: tuple[Decision, ...] = (),
    duration_ms: float | None = None,
    validated_checksum: str | None = None,
    unparsed_args: str | None = None,
) -> ToolCall:
    """Build a completed record from parts the caller already checked (the loop's constructor).

    ``args`` must be JSON data (it is frozen here) and ``checksum`` its `tool_call_checksum`;
    ``id`` and ``tool`` non-empty strings; ``results`` one valid result value; ``decisions`` a
    tuple of `Decision`. The loop builds every record this way, from a call's run
    (``pipeline/calls/_run.py``); everything else uses `ToolCall.completed`, which checks every
    part.
    """
    record = object.__new__(ToolCall)
    now = datetime.now(UTC)
    (id_, tool_, args_, checksum_, complete_, error_, results_, artifact_, inline_, ran_,
     decisions_, duration_, vchecksum_, unparsed_, created_, updated_,
     done_) = _RECORD_SETTERS  # fmt: skip
    id_(record, id)
    tool_(record, tool)
    # JSON data, checked by the caller; a run's arguments are frozen already (at parse)
    args_(record, args if type(args) is FrozenDict else freeze_json(args, "args"))
    checksum_(record, checksum)
    complete_(record, True)
    error_(record, is_error)
    results_(record, results)
    artifact_(record, from_artifact_tool)
    inline_(record, inline)
    ran_(record, ran)
    decisions_(record, decisions)
    duration_(record, duration_ms)
    vchecksum_(record, validated_checksum)
    unparsed_(record, unparsed_args)
    created_(record, now)
    updated_(record, now)
    done_(record, now)
    return record


ToolCall.__module__ = "pipeline.calls"

"""How `SqliteStore` turns tool calls, messages and turn records into rows, and back.

Tool calls are stored faithfully: id, tool, arguments (JSON text, key order kept), checksum,
flags and timestamps. Results are kept by shape (``results_kind``):

- ``text``: a ``str`` result, in the call row;
- ``artifact`` / ``artifacts``: one part per artifact, holding its class as an import path
  (``module:qualname``) and the spool key of its body (the body stays in the store's spool,
  see `pipeline.stores._body_refs`); loading re-creates the class over the spool's reader (the
  base `SpooledArtifact` when the class can no longer be imported). Parts written before
  schema version 3, and in-memory bodies holding a lone surrogate, hold the full text instead
  and load over an in-memory reader;
- ``media`` / ``medias``: one part per `Media`, holding its fields as JSON and its bytes.

SQLite text is UTF-8, which cannot hold a lone surrogate (file names decoded with
``surrogateescape``, a lone surrogate escaped in JSON): such a string is stored as a BLOB of its
``surrogatepass`` bytes (`sql_text`) and read back unchanged (`from_sql_text`).

The functions here are pure (no database access), so the store runs them on its worker thread.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from ..artifacts._artifact import SpooledArtifact
from ..artifacts._media import Media
from ..calls._decision import Decision
from ..calls._toolcall import ToolCall
from ..models._message import Message
from ..models._provider_state import ProviderState
from ._body_refs import missing_body
from ._spool import MemorySpoolReader
from ._store import TurnRecord

if TYPE_CHECKING:
    from ._spool import SpoolStore

__all__ = [
    "CALL_COLUMNS",
    "MESSAGE_COLUMNS",
    "TURN_COLUMNS",
    "BodyKey",
    "CallRow",
    "PartRow",
    "call_from_row",
    "encode_call",
    "encode_message",
    "encode_turn",
    "from_sql_text",
    "message_from_row",
    "sql_text",
    "turn_from_row",
]

ResultsKind = Literal["text", "artifact", "artifacts", "media", "medias"]

CALL_COLUMNS = (
    "id",
    "tool",
    "args",
    "checksum",
    "is_complete",
    "is_error",
    "from_artifact_tool",
    "inline",
    "created_at",
    "updated_at",
    "completed_at",
    "results_kind",
    "results_text",
    "ran",
    "decisions",
    "duration_ms",
    "validated_checksum",
    "unparsed_args",
)
"""The payload columns of ``tool_calls``, in the order `encode_call` returns them."""

MESSAGE_COLUMNS = ("id", "role", "content", "created_at", "tool_call_ids", "provider_state")
"""The payload columns of ``messages``, in the order `encode_message` returns them."""

TURN_COLUMNS = (
    "turn_id",
    "conversation_id",
    "status",
    "input",
    "output",
    "iterations",
    "error_code",
    "error_message",
    "started_at",
    "ended_at",
)
"""The columns of ``turns``, in the order `encode_turn` returns them."""

CallRow = tuple[Any, ...]
"""Values for `CALL_COLUMNS`."""

PartRow = tuple[
    int,
    str,
    str | None,
    str | bytes | None,
    int | None,
    str | bytes | None,
    bytes | None,
    str | bytes | None,
]
"""One result part: position, kind, artifact class, text (parts written before schema version
3), byte length, media JSON, data, spool key."""

BodyKey = Callable[[int, SpooledArtifact], str | None]
"""Given a part's position and its artifact, return the spool key holding the body (None: the
body goes into the row; see `pipeline.stores._body_refs`)."""

_artifact_classes: dict[str, type[SpooledArtifact]] = {}
_SURROGATE = re.compile("[\ud800-\udfff]")


def sql_text(value: str) -> str | bytes:
    """Return ``value`` as SQLite can bind it: a string with a lone surrogate becomes bytes."""
    if value.isascii() or _SURROGATE.search(value) is None:
        return value
    return value.encode("utf-8", "surrogatepass")


def _opt_text(value: str | None) -> str | bytes | None:
    return None if value is None else sql_text(value)


def from_sql_text(value: str | bytes) -> str:
    """Return the string `sql_text` stored (bytes are decoded back, surrogates included)."""
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


def _opt_from(value: str | bytes | None) -> str | None:
    return None if value is None else from_sql_text(value)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=True)


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _parse_time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _artifact_class(path: str) -> type[SpooledArtifact]:
    """Resolve an artifact class path among imported modules; anything else is the base class."""
    cached = _artifact_classes.get(path)
    if cached is not None:
        return cached
    module_name, _, qualname = path.partition(":")
    # Only modules already imported are consulted: a database is data, and naming a module in
    # it must never make this process import (run) that module.
    found: object = sys.modules.get(module_name)
    try:
        for part in qualname.split("."):
            found = getattr(found, part)
    except AttributeError:
        found = None
    cls = found if isinstance(found, type) and issubclass(found, SpooledArtifact) else None
    resolved = cls or SpooledArtifact
    _artifact_classes[path] = resolved
    return resolved


def _artifact_part(position: int, artifact: SpooledArtifact, body_key: BodyKey) -> PartRow:
    key = body_key(position, artifact)
    reader = artifact.reader
    return (
        position,
        "artifact",
        _class_path(type(artifact)),
        sql_text(reader.read_all()) if key is None else None,
        reader.byte_length(),
        None,
        None,
        None if key is None else sql_text(key),
    )


def _media_part(position: int, media: Media) -> PartRow:
    fields = {
        "kind": media.kind,
        "mime_type": media.mime_type,
        "filename": media.filename,
        "trust_tier": media.trust_tier,
        "modality_hazard": media.modality_hazard,
        "source": media.source,
        "id": media.id,
    }
    data = media.read_bytes()
    return (position, "media", None, None, None, sql_text(_json(fields)), data, None)


def encode_call(call: ToolCall, body_key: BodyKey) -> tuple[CallRow, list[PartRow]]:
    """Return the call's column values and its result parts.

    ``body_key`` places each artifact's body in the spool (see `BodyKey`); it is called before
    the rows are written, so a stored reference always has its body.
    """
    results: object = call.results
    kind: ResultsKind
    text: str | None = None
    parts: list[PartRow] = []
    if isinstance(results, str):
        kind, text = "text", results
    elif isinstance(results, SpooledArtifact):
        kind = "artifact"
        parts.append(_artifact_part(0, results, body_key))
    elif isinstance(results, Media):
        kind = "media"
        parts.append(_media_part(0, results))
    elif isinstance(results, tuple) and results and isinstance(results[0], Media):
        kind = "medias"
        parts.extend(_media_part(i, m) for i, m in enumerate(results))
    elif isinstance(results, tuple) and results and isinstance(results[0], SpooledArtifact):
        kind = "artifacts"
        parts.extend(_artifact_part(i, a, body_key) for i, a in enumerate(results))
    else:
        raise TypeError(f"cannot store tool call results of type {type(results).__name__}")
    row: CallRow = (
        sql_text(call.id),
        sql_text(call.tool),
        sql_text(_json(call.args)),
        call.checksum,
        int(call.is_complete),
        int(call.is_error),
        int(call.from_artifact_tool),
        int(call.inline),
        _time(call.created_at),
        _time(call.updated_at),
        _time(call.completed_at),
        kind,
        _opt_text(text),
        int(call.ran),
        sql_text(_json([d.as_dict() for d in call.decisions])),
        call.duration_ms,
        call.validated_checksum,
        _opt_text(call.unparsed_args),
    )
    return row, parts


def _decode_part(part: PartRow, spool: SpoolStore) -> SpooledArtifact | Media:
    _, kind, class_path, text, byte_length, media_json, data, spool_key = part
    if kind == "artifact":
        reader: Any
        if spool_key is not None:
            key = from_sql_text(spool_key)
            reader = spool.read(key) or missing_body(key)
        else:  # a body kept in the row (see BodyKey), or written before schema version 3
            reader = MemorySpoolReader(_opt_from(text) or "", byte_length)
        cls = _artifact_class(class_path or "")
        try:
            return cls(reader)
        except TypeError:  # a subclass whose constructor needs more than a reader
            return SpooledArtifact(reader)
    fields = json.loads(_opt_from(media_json) or "{}")
    return Media(data=data, **fields)


def call_from_row(row: Sequence[Any], parts: Sequence[PartRow], spool: SpoolStore) -> ToolCall:
    """Re-create a `ToolCall` from the values of `CALL_COLUMNS` and its result parts.

    Artifact bodies are read through ``spool`` (a body missing from it reads as one line
    saying so, see `missing_body`).
    """
    (
        call_id,
        tool,
        args,
        checksum,
        is_complete,
        is_error,
        from_artifact_tool,
        inline,
        created_at,
        updated_at,
        completed_at,
        kind,
        text,
        ran,
        decisions,
        duration_ms,
        validated_checksum,
        unparsed_args,
    ) = row
    results: Any
    if kind == "text":
        results = _opt_from(text)
    else:
        decoded = tuple(_decode_part(p, spool) for p in sorted(parts, key=lambda p: p[0]))
        results = decoded if kind in ("artifacts", "medias") else decoded[0]
    return ToolCall(
        id=from_sql_text(call_id),
        tool=from_sql_text(tool),
        args=json.loads(from_sql_text(args)),
        checksum=checksum,
        is_complete=bool(is_complete),
        is_error=bool(is_error),
        results=results,
        from_artifact_tool=bool(from_artifact_tool),
        inline=bool(inline),
        ran=bool(ran),
        decisions=tuple(
            Decision.from_dict(fields)
            for fields in json.loads(from_sql_text(decisions or "[]"))
        ),
        duration_ms=duration_ms,
        validated_checksum=validated_checksum,
        unparsed_args=_opt_from(unparsed_args),
        created_at=datetime.fromisoformat(created_at),
        updated_at=datetime.fromisoformat(updated_at),
        completed_at=_parse_time(completed_at),
    )


def encode_message(message: Message) -> tuple[Any, ...]:
    """Return the message's values for `MESSAGE_COLUMNS`."""
    return (
        sql_text(message.id),
        message.role,
        sql_text(message.content),
        _time(message.created_at),
        sql_text(_json(list(message.tool_call_ids))),
        None if message.provider_state is None else sql_text(message.provider_state.to_json()),
    )


def message_from_row(row: Sequence[Any]) -> Message:
    """Re-create a `Message` from the values of `MESSAGE_COLUMNS`."""
    message_id, role, content, created_at, tool_call_ids, provider_state = row
    state = _opt_from(provider_state)
    return Message(
        role=role,
        content=from_sql_text(content),
        id=from_sql_text(message_id),
        created_at=datetime.fromisoformat(created_at),
        tool_call_ids=tuple(json.loads(from_sql_text(tool_call_ids))),
        provider_state=None if state is None else ProviderState.from_json(state),
    )


def encode_turn(record: TurnRecord) -> tuple[Any, ...]:
    """Return the record's values for `TURN_COLUMNS`."""
    return (
        sql_text(record.turn_id),
        _opt_text(record.conversation_id),
        record.status,
        sql_text(record.input),
        _opt_text(record.output),
        record.iterations,
        record.error_code,
        _opt_text(record.error_message),
        _time(record.started_at),
        _time(record.ended_at),
    )


def turn_from_row(row: Sequence[Any]) -> TurnRecord:
    """Re-create a `TurnRecord` from the values of `TURN_COLUMNS`."""
    (
        turn_id,
        conversation_id,
        status,
        input_text,
        output,
        iterations,
        error_code,
        error_message,
        started_at,
        ended_at,
    ) = row
    return TurnRecord(
        turn_id=from_sql_text(turn_id),
        conversation_id=_opt_from(conversation_id),
        status=status,
        input=from_sql_text(input_text),
        output=_opt_from(output),
        iterations=iterations,
        error_code=error_code,
        error_message=_opt_from(error_message),
        started_at=datetime.fromisoformat(started_at),
        ended_at=datetime.fromisoformat(ended_at),
    )

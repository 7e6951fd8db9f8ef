"""``loopware audit verify|show LOG``: check an audit chain, or print its rows, from any sink.

``LOG`` names the log as the sinks do: a ``postgresql://`` (or ``postgres://``) URL, with
``--chain`` naming the chain; an SQLite file (told by its header); any other path is a JSON
Lines log. The log is opened as its sink opens it, and read through the sink's public API
(``verify()``, ``rows()``): see ``docs/audit.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Final, TextIO, get_args

from middleware.audit import (
    AuditAnchorFile,
    AuditDecision,
    AuditHead,
    AuditKey,
    AuditKeyError,
    AuditKeyMismatchError,
    AuditRow,
    AuditSink,
    JsonlAuditSink,
    PostgresAuditSink,
    SqliteAuditSink,
)
from pipeline.errors import LoopError, MissingExtraError

__all__ = [
    "UnreadableLogError",
    "add_audit_arguments",
    "add_log_arguments",
    "open_log",
    "read_key",
]

EXIT_OK: Final = 0
"""verify: the chain holds; show: the rows were printed."""
EXIT_BROKEN: Final = 1
"""verify: the chain does not verify, or the log was chained under another key."""
EXIT_USAGE: Final = 2
"""Bad options (argparse's own status)."""
EXIT_UNREADABLE: Final = 3
"""The log cannot be opened or read: a missing file, a file that holds no audit log, a server
that cannot be reached, a key or head file that cannot be loaded; show: a row does not parse."""
EXIT_MISSING_EXTRA: Final = 7
"""A PostgreSQL URL without the ``postgres`` extra installed (every command's status for it)."""

EXIT_STATUS: Final = """\
exit status:
  0  verify: the chain holds; show: the rows were printed
  1  verify: the chain does not verify: the first bad row and a reason code
     (E_AUDIT_ROW_EDITED, E_AUDIT_ROWS_MISSING, ... see docs/audit.md) are
     printed; or the log was chained under another key (E_AUDIT_KEY_MISMATCH)
  2  usage error
  3  the log cannot be read: no such file, not an audit log, the database
     cannot be reached, the key or head file cannot be loaded; show: a row
     does not parse (run verify to locate it)
  7  a postgresql:// log without the postgres extra (pip install 'loopware[postgres]')"""

_SQLITE_HEADER: Final = b"SQLite format 3\x00"
DECISION_WORDS: Final = tuple(word for part in get_args(AuditDecision) for word in get_args(part))
"""Every word a row's ``decision`` may hold (``--decision`` takes one)."""


class UnreadableLogError(Exception):
    """The log cannot be opened (exit 3), with the sentence to print."""


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    """The description and the ``verify`` and ``show`` subcommands of ``loopware audit``."""
    parser.description = (
        "Verify an audit chain (SQLite, JSON Lines or PostgreSQL), or print its\n"
        "rows filtered by conversation, call id or decision."
    )
    parser.epilog = EXIT_STATUS
    parser.set_defaults(handler=lambda args: _usage(parser))
    commands = parser.add_subparsers(title="commands")
    verify = commands.add_parser(
        "verify",
        help="check the chain: exit 0 when it holds, 1 naming the first bad row and why",
        description="Check every row's place, link and hash and that the chain reaches its\n"
        "head (with a key: that every row and the head are the key's; with --anchor: that\n"
        "the log still reaches the head saved there). Prints `LOG: intact: N rows` or\n"
        "`LOG: row K: CODE: what is wrong`.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXIT_STATUS,
    )
    _log_arguments(verify)
    verify.add_argument(
        "--anchor",
        metavar="FILE",
        help="also check the log against the head kept in this AuditAnchorFile",
    )
    verify.set_defaults(handler=_run_verify)
    show = commands.add_parser(
        "show",
        help="print the chain's rows (filtered), as text or JSON Lines",
        description="Print the rows of the chain in order, one per line, keeping those that\n"
        "match every filter given.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXIT_STATUS,
    )
    _log_arguments(show)
    show.add_argument("--conversation", metavar="ID", help="rows of this conversation only")
    show.add_argument("--call-id", metavar="ID", help="rows of this tool call only")
    show.add_argument(
        "--decision",
        choices=DECISION_WORDS,
        metavar="WORD",
        help="rows with this decision only: " + ", ".join(DECISION_WORDS),
    )
    show.set_defaults(handler=_run_show)


def _log_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "log", metavar="LOG", help="an SQLite or JSON Lines file, or a postgresql:// URL"
    )
    add_log_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def _error(command: str, message: str) -> None:
    print(f"loopware audit {command}: error: {message}", file=sys.stderr)


def read_key(args: argparse.Namespace) -> AuditKey | None:
    """The audit key ``--key-env`` or ``--key-file`` names, if either does."""
    if args.key_env is not None:
        return AuditKey.from_env(args.key_env)
    if args.key_file is not None:
        return AuditKey.from_file(args.key_file)
    return None


def _kind(log: str) -> str:
    """``"postgres"``, ``"sqlite"`` or ``"jsonl"``: which sink reads ``log``."""
    if log.startswith(("postgresql://", "postgres://")):
        return "postgres"
    path = Path(log)
    if not path.is_file():
        raise UnreadableLogError(f"{log}: no such file")
    with path.open("rb") as f:
        header = f.read(len(_SQLITE_HEADER))
    if header != _SQLITE_HEADER:
        return "jsonl"
    try:  # opening the sink would create the tables: refuse a file that holds no audit log
        with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as conn:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit_rows'"
            ).fetchone()
        conn.close()
    except sqlite3.Error as exc:
        raise UnreadableLogError(f"{log}: cannot read the SQLite file: {exc}") from exc
    if found is None:
        raise UnreadableLogError(f"{log}: the SQLite file holds no audit log")
    return "sqlite"


def open_log(log: str, *, chain: str, key: AuditKey | None) -> AuditSink:
    """The sink that reads ``log`` (PostgreSQL URL, SQLite file or JSON Lines), as it opens it.

    Raises:
        UnreadableLogError: no such file, or an SQLite file that holds no audit log.
    """
    kind = _kind(log)
    if kind == "postgres":
        return PostgresAuditSink(log, chain=chain, key=key)
    if kind == "sqlite":
        return SqliteAuditSink(log, key=key)
    return JsonlAuditSink(log, key=key)


def add_log_arguments(parser: argparse.ArgumentParser) -> None:
    """``--chain``, ``--key-env`` and ``--key-file``: how an audit log is opened."""
    parser.add_argument(
        "--chain", default="default", help="the PostgreSQL chain's name (default: default)"
    )
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument(
        "--key-env", metavar="NAME", help="the audit key (hex) is in this environment variable"
    )
    keys.add_argument("--key-file", metavar="FILE", help="the audit key (hex) is in this file")


@contextmanager
def _opened(args: argparse.Namespace) -> Iterator[AuditSink]:
    """The log's sink, opened with the key given, closed at the end."""
    sink = open_log(args.log, chain=args.chain, key=read_key(args))
    try:
        yield sink
    finally:
        sink.close()


def _status(command: str, args: argparse.Namespace, run: Any) -> int:
    """Run ``run(sink)`` on the opened log, turning what stops it into an exit status."""
    try:
        with _opened(args) as sink:
            status: int = run(sink)
            return status
    except AuditKeyMismatchError as exc:
        _report(args, sys.stdout, ok=False, reason=exc.code, text=str(exc))  # CODE: message
        return EXIT_BROKEN
    except MissingExtraError:  # told once, by main(): exit 7
        raise
    except ImportError as exc:
        _error(command, f"{exc.name or exc}: pip install 'loopware[postgres]'")
        return EXIT_MISSING_EXTRA
    except (UnreadableLogError, AuditKeyError, LoopError, OSError) as exc:
        _error(command, str(exc))
        return EXIT_UNREADABLE


def _run_verify(args: argparse.Namespace) -> int:
    head: AuditHead | None = None
    if args.anchor is not None:
        head = AuditAnchorFile(args.anchor).read()
        if head is None:
            _error("verify", f"{args.anchor}: not an audit anchor file")
            return EXIT_UNREADABLE

    def verify(sink: AuditSink) -> int:
        found = sink.verify(head=head)
        _report(
            args,
            sys.stdout,
            ok=found.ok,
            reason=found.reason,
            text=found.explain(),
            rows_checked=found.rows_checked,
            first_bad_row=found.first_bad_row,
        )
        return EXIT_OK if found else EXIT_BROKEN

    return _status("verify", args, verify)


def _report(
    args: argparse.Namespace,
    out: TextIO,
    *,
    ok: bool,
    reason: str | None,
    text: str,
    rows_checked: int | None = None,
    first_bad_row: int | None = None,
) -> None:
    if not args.json:
        out.write(f"{args.log}: {text}\n")
        return
    out.write(
        json.dumps(
            {
                "log": args.log,
                "ok": ok,
                "rows_checked": rows_checked,
                "first_bad_row": first_bad_row,
                "reason": reason,
                "text": text,
            }
        )
        + "\n"
    )


def _run_show(args: argparse.Namespace) -> int:
    def show(sink: AuditSink) -> int:
        try:
            rows = sink.rows()
        except ValueError as exc:
            _error("show", f"{exc} (run `loopware audit verify` to locate it)")
            return EXIT_UNREADABLE
        for row in rows:
            if _matches(row, args):
                sys.stdout.write((_json_row(row) if args.json else _text_row(row)) + "\n")
        return EXIT_OK

    return _status("show", args, show)


def _matches(row: AuditRow, args: argparse.Namespace) -> bool:
    entry = row.entry
    return (
        (args.conversation is None or entry.conversation_id == args.conversation)
        and (args.call_id is None or entry.call_id == args.call_id)
        and (args.decision is None or entry.decision == args.decision)
    )


def _json_row(row: AuditRow) -> str:
    """One row as a JSON object: its place in the chain and every field of its entry."""
    fields: dict[str, Any] = {"index": row.index}
    for field in dataclasses.fields(row.entry):
        value = getattr(row.entry, field.name)
        fields[field.name] = value.isoformat() if isinstance(value, datetime) else value
    fields["prev_hash"], fields["hash"] = row.prev_hash, row.hash
    return json.dumps(fields, ensure_ascii=False)


def _text_row(row: AuditRow) -> str:
    """One row as a line: index, kind, what was decided about what, and why."""
    e = row.entry
    parts = [f"#{row.index}", e.recorded_at.isoformat(timespec="seconds"), e.kind]
    if e.kind == "turn":
        parts.append(f"{e.status} turn={e.turn_id}")
    else:
        parts += [e.decision or "-", e.tool or "-", f"call={e.call_id or '-'}"]
        parts.append(f"turn={e.turn_id or '-'}")
    if e.conversation_id is not None:
        parts.append(f"conversation={e.conversation_id}")
    if e.policy or e.reason:
        parts.append(f"({e.policy or '-'}: {e.reason or '-'})")
    return " ".join(parts)

"""The `SqliteStore` schema and its migrations.

Each migration is a version number and the statements that bring the previous version to it.
`migrate` runs inside the store's opening transaction: it records every applied version in
``schema_migrations`` and refuses a database written by a newer loopware. To change the schema,
append a migration; never edit one that has shipped.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from ..errors import InvalidRunnerConfigError

__all__ = ["SCHEMA_VERSION", "migrate"]

_MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            """CREATE TABLE turns (
                turn_id TEXT PRIMARY KEY,
                conversation_id TEXT,
                status TEXT NOT NULL,
                input TEXT NOT NULL,
                output TEXT,
                iterations INTEGER NOT NULL,
                error_code TEXT,
                error_message TEXT,
                started_at TEXT NOT NULL,
                ended_at TEXT NOT NULL
            )""",
            "CREATE INDEX turns_by_conversation ON turns (conversation_id)",
            """CREATE TABLE messages (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                scope TEXT NOT NULL,
                conversation_id TEXT,
                turn_id TEXT NOT NULL,
                id TEXT NOT NULL,
                role TEXT NOT NULL,
                content TEXT NOT NULL,
                created_at TEXT NOT NULL,
                tool_call_ids TEXT NOT NULL,
                UNIQUE (scope, id)
            )""",
            "CREATE INDEX messages_by_turn ON messages (turn_id)",
            """CREATE TABLE tool_calls (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                scope TEXT NOT NULL,
                conversation_id TEXT,
                turn_id TEXT NOT NULL,
                id TEXT NOT NULL,
                tool TEXT NOT NULL,
                args TEXT NOT NULL,
                checksum TEXT NOT NULL,
                is_complete INTEGER NOT NULL,
                is_error INTEGER NOT NULL,
                from_artifact_tool INTEGER NOT NULL,
                inline INTEGER NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                completed_at TEXT,
                results_kind TEXT NOT NULL,
                results_text TEXT,
                UNIQUE (scope, id)
            )""",
            "CREATE INDEX tool_calls_by_turn ON tool_calls (turn_id)",
            """CREATE TABLE tool_call_results (
                call_seq INTEGER NOT NULL REFERENCES tool_calls (seq) ON DELETE CASCADE,
                position INTEGER NOT NULL,
                kind TEXT NOT NULL,
                artifact_class TEXT,
                text TEXT,
                byte_length INTEGER,
                media TEXT,
                data BLOB,
                PRIMARY KEY (call_seq, position)
            )""",
        ),
    ),
    (
        2,
        (
            # a call is keyed by its turn too: concurrent turns of one conversation may store
            # the same provider id; SQLite cannot drop a UNIQUE constraint, so the
            # table is rebuilt with its rows (seq kept, so the results still point at them)
            """CREATE TABLE tool_calls_v2 (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                scope TEXT NOT NULL,
                conversation_id TEXT,
                turn_id TEXT NOT NULL,
                id TEXT NOT NULL,
                tool TEXT NOT NULL,
                args TEXT NOT NULL,
                checksum TEXT NOT NULL,
                is_complete INTEGER NOT NULL,
                is_error INTEGER NOT NULL,
                from_artifact_tool INTEGER NOT NULL,
                inline INTEGER NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                completed_at TEXT,
                results_kind TEXT NOT NULL,
                results_text TEXT,
                UNIQUE (scope, turn_id, id)
            )""",
            "INSERT INTO tool_calls_v2 SELECT * FROM tool_calls ORDER BY seq",
            "DROP TABLE tool_calls",
            "ALTER TABLE tool_calls_v2 RENAME TO tool_calls",
            "CREATE INDEX tool_calls_by_turn ON tool_calls (turn_id)",
        ),
    ),
    (
        3,
        (
            # artifact bodies by reference: a part names the spool key of
            # its body; parts written before keep their text and stay readable
            "ALTER TABLE tool_call_results ADD COLUMN spool_key TEXT",
        ),
    ),
    (
        4,
        (
            # a call's record carries whether its handler ran, the decisions taken about it,
            # how long it ran and the checksum of its validated arguments (docs/architecture.md,
            # "One call"); calls stored before say nothing of it: a result that is not an error
            # came from the handler, an error is taken as not run
            "ALTER TABLE tool_calls ADD COLUMN ran INTEGER NOT NULL DEFAULT 0",
            "UPDATE tool_calls SET ran = 1 - is_error",
            "ALTER TABLE tool_calls ADD COLUMN decisions TEXT NOT NULL DEFAULT '[]'",
            "ALTER TABLE tool_calls ADD COLUMN duration_ms REAL",
            "ALTER TABLE tool_calls ADD COLUMN validated_checksum TEXT",
        ),
    ),
    (
        5,
        (
            # the built-in artifact classes report their public module, pipeline.artifacts (they
            # reported pipeline): parts stored before name the class by the old path
            "UPDATE tool_call_results SET artifact_class = 'pipeline.artifacts:' || "
            "substr(artifact_class, 10) WHERE artifact_class IN ('pipeline:SpooledArtifact', "
            "'pipeline:SpooledJsonArtifact', 'pipeline:SpooledMarkdownArtifact')",
        ),
    ),
    (
        6,
        (
            # scoped limits (`CounterStore`): one row per slot under a counter; expires_at is
            # the end of a live reservation, NULL once the slot is consumed
            """CREATE TABLE IF NOT EXISTS counter_slots (
                counter TEXT NOT NULL,
                slot TEXT NOT NULL,
                amount INTEGER NOT NULL,
                at REAL NOT NULL,
                expires_at REAL,
                PRIMARY KEY (counter, slot)
            )""",
        ),
    ),
    (
        7,
        (
            # what a provider asked to get back with an assistant message (thinking blocks,
            # reasoning items, a phase: pipeline/models/_provider_state.py), as JSON text, and a
            # call's arguments text when it was no JSON object
            "ALTER TABLE messages ADD COLUMN provider_state TEXT",
            "ALTER TABLE tool_calls ADD COLUMN unparsed_args TEXT",
        ),
    ),
    (
        8,
        (
            # a conversation's counts kept with each call's write, so a turn's start reads the
            # rows changed since it last read them, not every call (pipeline/stores/
            # _history_index.py): a version per conversation, and per counted key (c: checksum,
            # v: validated checksum, i: call id) how many stored calls carry it
            "CREATE TABLE conversations (scope TEXT PRIMARY KEY, version INTEGER NOT NULL)",
            """CREATE TABLE conversation_counts (
                scope TEXT NOT NULL,
                kind TEXT NOT NULL,
                key TEXT NOT NULL,
                n INTEGER NOT NULL,
                version INTEGER NOT NULL,
                PRIMARY KEY (scope, kind, key)
            ) WITHOUT ROWID""",
            "CREATE INDEX conversation_counts_by_version ON conversation_counts (scope, version)",
            "INSERT INTO conversations (scope, version) SELECT DISTINCT scope, 1 FROM tool_calls "
            "WHERE conversation_id IS NOT NULL",
            "INSERT INTO conversation_counts SELECT scope, 'c', checksum, COUNT(*), 1 "
            "FROM tool_calls WHERE conversation_id IS NOT NULL GROUP BY scope, checksum",
            "INSERT INTO conversation_counts SELECT scope, 'v', validated_checksum, COUNT(*), 1 "
            "FROM tool_calls WHERE conversation_id IS NOT NULL AND validated_checksum IS NOT NULL "
            "GROUP BY scope, validated_checksum",
            "INSERT INTO conversation_counts SELECT scope, 'i', id, COUNT(*), 1 "
            "FROM tool_calls WHERE conversation_id IS NOT NULL GROUP BY scope, id",
        ),
    ),
)

SCHEMA_VERSION = _MIGRATIONS[-1][0]
"""The schema version this code writes; older databases are migrated when opened."""


def migrate(cur: sqlite3.Cursor, path: str) -> int:
    """Bring the database to `SCHEMA_VERSION` (inside the caller's transaction).

    Returns the version the database had before (0 for a new one).

    Foreign keys must be off while it runs (a rebuilt table is dropped and renamed; its
    dependent rows must stay); the store turns them on afterwards.

    Raises:
        InvalidRunnerConfigError: the database's schema is newer than this code's.
    """
    cur.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    current = cur.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] or 0
    if current > SCHEMA_VERSION:
        raise InvalidRunnerConfigError(
            f"SqliteStore: {path!r} has schema version {current}, newer than this loopware's "
            f"{SCHEMA_VERSION}",
            field="store",
        )
    for version, statements in _MIGRATIONS:
        if version <= current:
            continue
        for statement in statements:
            cur.execute(statement)
        cur.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
            (version, datetime.now(UTC).isoformat()),
        )
    return int(current)

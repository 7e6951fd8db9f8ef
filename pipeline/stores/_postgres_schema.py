"""The `PostgresStore` schema and its migrations.

The tables live in their own PostgreSQL schema, ``loopware``, so they never clash with an
application's tables (or DBOS's) in a shared database. They mirror `SqliteStore`'s tables with
one difference: every free-text value (ids, arguments, contents) is ``bytea`` holding its UTF-8
bytes (``surrogatepass``), because PostgreSQL ``text`` can hold neither a NUL character nor a
lone surrogate and a store must keep whatever a turn produced. (Read one in SQL with
``convert_from(column, 'UTF8')``.) Artifact bodies are kept in the spool store: a result part
holds the spool key of its body (see `pipeline.stores._body_refs`; only an in-memory body
holding a lone surrogate is kept in the row, in ``text``).

`migrate` runs in one transaction under a transaction-level advisory lock, so workers starting
together against a new database create the schema once. Append a migration to change the
schema; never edit one that has shipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import InvalidRunnerConfigError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["SCHEMA", "SCHEMA_VERSION", "migrate"]

SCHEMA = "loopware"
"""The PostgreSQL schema holding the store's tables (and the audit sink's)."""

_LOCK = 0x6C6F6F70  # "loop": the advisory lock key serialising migrations

_MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            """CREATE TABLE loopware.turns (
                turn_id bytea PRIMARY KEY,
                conversation_id bytea,
                status text NOT NULL,
                input bytea NOT NULL,
                output bytea,
                iterations integer NOT NULL,
                error_code text,
                error_message bytea,
                started_at text NOT NULL,
                ended_at text NOT NULL
            )""",
            "CREATE INDEX turns_by_conversation ON loopware.turns (conversation_id)",
            """CREATE TABLE loopware.messages (
                seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                scope bytea NOT NULL,
                conversation_id bytea,
                turn_id bytea NOT NULL,
                id bytea NOT NULL,
                role text NOT NULL,
                content bytea NOT NULL,
                created_at text NOT NULL,
                tool_call_ids bytea NOT NULL,
                UNIQUE (scope, id)
            )""",
            "CREATE INDEX messages_by_turn ON loopware.messages (turn_id)",
            """CREATE TABLE loopware.tool_calls (
                seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                scope bytea NOT NULL,
                conversation_id bytea,
                turn_id bytea NOT NULL,
                id bytea NOT NULL,
                tool bytea NOT NULL,
                args bytea NOT NULL,
                checksum text NOT NULL,
                is_complete smallint NOT NULL,
                is_error smallint NOT NULL,
                from_artifact_tool smallint NOT NULL,
                inline smallint NOT NULL,
                created_at text NOT NULL,
                updated_at text NOT NULL,
                completed_at text,
                results_kind text NOT NULL,
                results_text bytea,
                UNIQUE (scope, turn_id, id)
            )""",
            "CREATE INDEX tool_calls_by_turn ON loopware.tool_calls (turn_id)",
            """CREATE TABLE loopware.tool_call_results (
                call_seq bigint NOT NULL
                    REFERENCES loopware.tool_calls (seq) ON DELETE CASCADE,
                position integer NOT NULL,
                kind text NOT NULL,
                artifact_class text,
                text bytea,
                byte_length bigint,
                media bytea,
                data bytea,
                spool_key bytea,
                PRIMARY KEY (call_seq, position)
            )""",
        ),
    ),
    (
        2,
        (
            # a call's record carries whether its handler ran, the decisions taken about it,
            # how long it ran and the checksum of its validated arguments (docs/architecture.md,
            # "One call"); calls stored before: a result that is not an error came from the
            # handler, an error is taken as not run
            "ALTER TABLE loopware.tool_calls ADD COLUMN ran smallint NOT NULL DEFAULT 0",
            "UPDATE loopware.tool_calls SET ran = 1 - is_error",
            "ALTER TABLE loopware.tool_calls ADD COLUMN decisions bytea NOT NULL "
            "DEFAULT '\\x5b5d'::bytea",
            "ALTER TABLE loopware.tool_calls ADD COLUMN duration_ms double precision",
            "ALTER TABLE loopware.tool_calls ADD COLUMN validated_checksum text",
        ),
    ),
    (
        3,
        (
            # the built-in artifact classes report their public module, pipeline.artifacts (they
            # reported pipeline): parts stored before name the class by the old path
            "UPDATE loopware.tool_call_results SET artifact_class = 'pipeline.artifacts:' || "
            "substr(artifact_class, 10) WHERE artifact_class IN ('pipeline:SpooledArtifact', "
            "'pipeline:SpooledJsonArtifact', 'pipeline:SpooledMarkdownArtifact')",
        ),
    ),
    (
        4,
        (
            # scoped limits (`CounterStore`): one row per slot under a counter; expires_at is
            # the end of a live reservation, NULL once the slot is consumed
            """CREATE TABLE IF NOT EXISTS loopware.counter_slots (
                counter bytea NOT NULL,
                slot bytea NOT NULL,
                amount bigint NOT NULL,
                at double precision NOT NULL,
                expires_at double precision,
                PRIMARY KEY (counter, slot)
            )""",
        ),
    ),
    (
        5,
        (
            # what a provider asked to get back with an assistant message, as JSON text, and a
            # call's arguments text when it was no JSON object (as SqliteStore's version 7)
            "ALTER TABLE loopware.messages ADD COLUMN provider_state bytea",
            "ALTER TABLE loopware.tool_calls ADD COLUMN unparsed_args bytea",
        ),
    ),
    (
        6,
        (
            # a conversation's counts kept with each call's write (as SqliteStore's version 8,
            # pipeline/stores/_history_index.py), and its records found by scope in seq order
            """CREATE TABLE loopware.conversations (
                scope bytea PRIMARY KEY,
                version bigint NOT NULL
            )""",
            """CREATE TABLE loopware.conversation_counts (
                scope bytea NOT NULL,
                kind text NOT NULL,
                key bytea NOT NULL,
                n bigint NOT NULL,
                version bigint NOT NULL,
                PRIMARY KEY (scope, kind, key)
            )""",
            "CREATE INDEX conversation_counts_by_version "
            "ON loopware.conversation_counts (scope, version)",
            "CREATE INDEX messages_by_scope ON loopware.messages (scope, seq)",
            "CREATE INDEX tool_calls_by_scope ON loopware.tool_calls (scope, seq)",
            "INSERT INTO loopware.conversations (scope, version) SELECT DISTINCT scope, 1 "
            "FROM loopware.tool_calls WHERE conversation_id IS NOT NULL",
            "INSERT INTO loopware.conversation_counts "
            "SELECT scope, 'c', convert_to(checksum, 'UTF8'), count(*), 1 FROM loopware.tool_calls "
            "WHERE conversation_id IS NOT NULL GROUP BY scope, checksum",
            "INSERT INTO loopware.conversation_counts "
            "SELECT scope, 'v', convert_to(validated_checksum, 'UTF8'), count(*), 1 "
            "FROM loopware.tool_calls WHERE conversation_id IS NOT NULL "
            "AND validated_checksum IS NOT NULL GROUP BY scope, validated_checksum",
            "INSERT INTO loopware.conversation_counts "
            "SELECT scope, 'i', id, count(*), 1 FROM loopware.tool_calls "
            "WHERE conversation_id IS NOT NULL GROUP BY scope, id",
        ),
    ),
)

SCHEMA_VERSION = _MIGRATIONS[-1][0]
"""The schema version this code writes; older databases are migrated when opened."""


async def migrate(conn: AsyncConnection[tuple[object, ...]], where: str) -> None:
    """Bring the database to `SCHEMA_VERSION` (one transaction, under the advisory lock).

    Raises:
        InvalidRunnerConfigError: the database's schema is newer than this code's.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_migrations "
            "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        cur = await conn.execute(f"SELECT MAX(version) FROM {SCHEMA}.schema_migrations")
        row = await cur.fetchone()
        current = int(row[0] or 0) if row is not None else 0  # type: ignore[call-overload]
        if current > SCHEMA_VERSION:
            raise InvalidRunnerConfigError(
                f"PostgresStore: {where} has schema version {current}, newer than this "
                f"loopware's {SCHEMA_VERSION}",
                field="store",
            )
        for version, statements in _MIGRATIONS:
            if version <= current:
                continue
            for statement in statements:
                await conn.execute(statement)
            await conn.execute(
                f"INSERT INTO {SCHEMA}.schema_migrations (version) VALUES (%s)", (version,)
            )

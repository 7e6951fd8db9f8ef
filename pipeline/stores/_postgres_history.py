"""`PostgresStore`'s kept conversation counts: written with each call, read as a delta.

See ``pipeline/stores/_history_index.py`` for the design. A call's write first bumps its
conversation's version (``BUMP``: the row lock serialises the conversation's writers until they
commit, so versions follow commit order), then counts the change (``COUNT``: the old row's keys
out, the new call's in, computed by the server, so the write stays one pipelined round trip),
then writes the call. A turn's start reads the version and the rows changed since the version
the store holds in one statement (one snapshot).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._conversation import ConversationIndex
from ._history_index import IndexCache

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["BUMP", "COUNT", "count_params", "read_index"]

BUMP = (
    "INSERT INTO loopware.conversations AS c (scope, version) VALUES (%s, 1) "
    "ON CONFLICT (scope) DO UPDATE SET version = c.version + 1"
)
"""Take the conversation's row lock and a new version (the scope is the parameter)."""

COUNT = """WITH old AS (
    SELECT convert_to(checksum, 'UTF8') AS c, convert_to(validated_checksum, 'UTF8') AS v,
        id AS i
    FROM loopware.tool_calls WHERE scope = %(scope)s AND turn_id = %(turn)s AND id = %(id)s
), changes AS (
    SELECT kind, key, sum(n)::bigint AS n FROM (
        SELECT 'c' AS kind, c AS key, -1 AS n FROM old
        UNION ALL SELECT 'v', v, -1 FROM old WHERE v IS NOT NULL
        UNION ALL SELECT 'i', i, -1 FROM old
        UNION ALL SELECT 'c', %(c)s::bytea, 1 WHERE %(c)s::bytea IS NOT NULL
        UNION ALL SELECT 'v', %(v)s::bytea, 1 WHERE %(v)s::bytea IS NOT NULL
        UNION ALL SELECT 'i', %(id)s::bytea, 1 WHERE %(c)s::bytea IS NOT NULL
    ) AS d GROUP BY kind, key HAVING sum(n) <> 0
)
INSERT INTO loopware.conversation_counts AS k (scope, kind, key, n, version)
SELECT %(scope)s, kind, key, n,
    (SELECT version FROM loopware.conversations WHERE scope = %(scope)s)
FROM changes
ON CONFLICT (scope, kind, key) DO UPDATE SET n = k.n + excluded.n, version = excluded.version"""
"""Count a call's write (``c`` None: its delete) before the row changes (`count_params`)."""

_READ = """SELECT c.version, m.seq, t.seq, k.kind, k.key, k.n, k.version
FROM (SELECT %(scope)s::bytea AS scope) AS s
LEFT JOIN loopware.conversations AS c ON c.scope = s.scope
CROSS JOIN (SELECT max(seq) AS seq FROM loopware.messages WHERE scope = %(scope)s) AS m
CROSS JOIN (SELECT max(seq) AS seq FROM loopware.tool_calls WHERE scope = %(scope)s) AS t
LEFT JOIN loopware.conversation_counts AS k ON k.scope = s.scope AND k.version > %(since)s"""
"""The version, the last message and call seqs, and the rows changed since ``since``.

Never prepared: a generic plan (psycopg prepares a statement run 5 times) cannot know that
``since`` is the conversation's recent past, and once the table is analysed it scans every row
of the conversation's counts; a plan made for the value reads the index range (0.1 ms to
plan)."""


def count_params(
    key: Sequence[object], checksum: str | None, validated: str | None
) -> dict[str, Any]:
    """`COUNT`'s parameters: the call's (scope, turn id, id) and keys (None: deleted)."""
    scope, turn_id, call_id = key
    return {
        "scope": scope,
        "turn": turn_id,
        "id": call_id,
        "c": None if checksum is None else checksum.encode(),
        "v": None if validated is None else validated.encode(),
    }


async def read_index(
    conn: AsyncConnection[Any], scope: bytes, cache: IndexCache
) -> tuple[ConversationIndex, int, int]:
    """The conversation's index, and its last message and call seqs (one statement).

    Reads only the count rows changed since ``cache`` read the conversation; one statement is
    one snapshot and one round trip.
    """
    name = scope.decode("utf-8", "surrogatepass")
    params = {"scope": scope, "since": cache.version(name)}
    cur = await conn.execute(_READ, params, prepare=False)  # a plan for this ``since``
    rows = await cur.fetchall()
    version, message_seq, call_seq = (int(v or 0) for v in rows[0][:3])
    changed = (
        (kind, bytes(key).decode("utf-8", "surrogatepass"), int(n), int(at))
        for *_, kind, key, n, at in rows
        if kind is not None
    )
    return cache.refresh(name, version, changed), message_seq, call_seq

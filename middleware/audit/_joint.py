"""`JointRows`: a sink's rows written by a store in the store's own transaction.

``SqliteAuditSink.joint`` and ``PostgresAuditSink.joint`` hand one to `AuditLog`, which hands it
to the store (``pipeline.stores.TransactionWriter``): the store runs ``write`` with its
transaction's connection before it commits, then tells it how the transaction ended. Once
committed, the sink learns that rows were written by another connection (its head in memory is
then read again).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

__all__ = ["JointRows"]


class JointRows:
    """A ``pipeline.stores.TransactionWriter``: a sink's write and its "written elsewhere" hook."""

    __slots__ = ("_name", "_settled", "_write")

    def __init__(
        self,
        name: str,
        write: Callable[[object], Awaitable[None] | None],
        settled: Callable[[], None],
    ) -> None:
        """Wrap ``write`` (the rows, with a store's connection) and ``settled`` (after commit)."""
        self._name = name
        self._write = write
        self._settled = settled

    def __repr__(self) -> str:
        """Show whose rows these are."""
        return f"JointRows({self._name})"

    def write(self, connection: object) -> Awaitable[None] | None:
        """Write the rows with the store's ``connection``, in its transaction."""
        return self._write(connection)

    def settle(self, committed: bool) -> None:
        """Once committed, tell the sink its rows were written by another connection."""
        if committed:
            self._settled()

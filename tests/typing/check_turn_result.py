"""Type checks for TurnResult and its stash snapshot (checked by mypy, never collected)."""

from __future__ import annotations

from typing import Any, assert_type

from pipeline import StashKey, StashSnapshot, TurnResult, TurnRunner

SEARCHES = StashKey[int]("counts.search", default=0)
TAGS = StashKey[list[str]]("tags", default=[])


async def main(runner: TurnRunner) -> None:
    result = await runner.run("hi")
    assert_type(result, TurnResult)
    assert_type(result.stash, StashSnapshot)

    # A typed key reads a typed value from the snapshot.
    assert_type(result.stash[SEARCHES], int)
    assert_type(result.stash[TAGS], list[str])
    assert_type(SEARCHES in result.stash, bool)

    # A plain key reads it as the dict it is.
    assert_type(result.stash["counts"], Any)
    assert_type(result.stash.get("counts"), Any | None)
    plain: dict[str, Any] = result.stash
    del plain

    # A typed value is not another type.
    count: str = result.stash[SEARCHES]  # type: ignore[assignment]
    del count

    # Only str or StashKey index it.
    result.stash[3]  # type: ignore[call-overload]

    # The result stays frozen.
    result.stash = StashSnapshot()  # type: ignore[misc]

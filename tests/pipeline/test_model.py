"""The model seam's values: `Message` checks its parts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from pipeline.errors import InvalidToolCallError
from pipeline.models import Message

BAD_MESSAGES: dict[str, dict[str, Any]] = {
    "role": {"role": "system", "content": "x"},
    "content": {"role": "user", "content": None},
    "empty-id": {"role": "user", "content": "x", "id": ""},
    "naive-time": {"role": "user", "content": "x", "created_at": datetime(2024, 1, 1)},
    "text-time": {"role": "user", "content": "x", "created_at": "2024-01-01T00:00:00Z"},
}


@pytest.mark.parametrize("fields", list(BAD_MESSAGES.values()), ids=list(BAD_MESSAGES))
def test_bad_message_parts_raise_a_typed_error(fields: dict[str, Any]) -> None:
    """A bad role, content, id or timestamp raises InvalidToolCallError, never AttributeError."""
    with pytest.raises(InvalidToolCallError):
        Message(**fields)


def test_message_defaults_an_id_and_an_aware_timestamp() -> None:
    """Without id or created_at, a message gets a fresh id and the current aware time."""
    first, second = Message(role="user", content="a"), Message(role="user", content="b")
    assert first.id != second.id
    assert first.created_at.tzinfo is not None
    assert first.tool_call_ids == ()

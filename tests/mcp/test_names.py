"""MCP tool names become provider-safe names, or are skipped with a reason."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from pipeline.mcp._names import plan_names, safe_name

PROVIDER_SAFE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def test_safe_names_are_kept_with_their_prefix() -> None:
    assert safe_name("git_", "status") == "git_status"


def test_unsafe_characters_are_replaced() -> None:
    assert safe_name("", "files/read.v2") == "files_read_v2"


def test_long_names_are_cut_and_stay_apart() -> None:
    a, b = safe_name("", "a" * 100), safe_name("", "a" * 99 + "b")
    assert a is not None
    assert b is not None
    assert a != b
    assert len(a) == len(b) == 64


def test_unusable_and_colliding_names_are_skipped_with_a_reason() -> None:
    kept, skipped = plan_names("", ["files/read", "files_read", "...", "ok", "ok"])
    assert kept == {"files/read": "files_read"}
    assert "already has" in skipped["files_read"]
    assert "no character" in skipped["..."]
    assert "twice" in skipped["ok"]


@given(st.text(max_size=8), st.lists(st.text(max_size=120), max_size=8))
def test_every_kept_name_is_provider_safe_and_unique(prefix: str, names: list[str]) -> None:
    kept, skipped = plan_names(prefix, names)
    assert all(PROVIDER_SAFE.fullmatch(n) for n in kept.values())
    assert len(set(kept.values())) == len(kept)
    assert set(kept) | set(skipped) == set(names)

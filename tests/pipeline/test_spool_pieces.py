"""Readers work through a large body in pieces, and read it exactly as they would whole.

`split_lines`, `count_lines`, `utf8_length` and `decode` cut a body into pieces (so that no C
call holds the interpreter lock long); whatever the pieces, they agree with the one-call forms.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.stores import _spool
from pipeline.stores._spool import count_lines, decode, split_lines, utf8_length

TEXT = st.text(alphabet=st.sampled_from(["a", "b", "\n", "\r", "é", "😀", "\ud800"]), max_size=80)


@pytest.fixture(autouse=True)
def tiny_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of 4 characters, so every short text crosses several boundaries."""
    monkeypatch.setattr(_spool, "PIECE", 4)


@given(TEXT)
def test_lines_split_in_pieces_are_the_lines_split_whole(text: str) -> None:
    assert split_lines(text) == text.split("\n")
    assert count_lines(text) == text.count("\n") + 1


@given(TEXT)
def test_the_utf8_length_counted_in_pieces_is_the_whole_length(text: str) -> None:
    assert utf8_length(text) == len(text.encode("utf-8", "surrogatepass"))


@given(st.binary(max_size=64) | TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_bytes_decoded_in_pieces_read_as_decoded_whole(data: bytes) -> None:
    assert decode(data) == data.decode("utf-8", errors="replace")

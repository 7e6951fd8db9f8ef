"""Argument models of the base artifact query methods (the tools' input schemas, DESIGN 10.2)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ._tokens import EncodingName

__all__ = ["ArgsModel", "CatArgs", "CountArgs", "LineRangeArgs", "NoArgs", "TokenArgs"]


class ArgsModel(BaseModel):
    """Base of the query methods' argument models: unknown arguments are refused.

    Their validators are built on first use (``defer_build``), not on ``import pipeline``: the
    forged tools' input models, which subclass them, are what validates a call.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)


class NoArgs(ArgsModel):
    """No arguments besides ``call_id``."""


class CountArgs(ArgsModel):
    """How many lines to return."""

    n: int = Field(default=10, ge=0, description="Number of lines to return.")


class CatArgs(ArgsModel):
    """A range of lines with Python slice semantics."""

    start: int | None = Field(
        default=None, description="First line index (0-based; negative counts from the end)."
    )
    end: int | None = Field(
        default=None, description="Index after the last line (exclusive; null: to the end)."
    )


class LineRangeArgs(ArgsModel):
    """A range of lines to look in (0-based, end exclusive), as the records' line fields."""

    start_line: int = Field(
        default=0, ge=0, description="First line to include (0-based; default: the first)."
    )
    end_line: int | None = Field(
        default=None, ge=0, description="Line after the last one included (null: to the end)."
    )


class TokenArgs(ArgsModel):
    """The tokenizer to estimate for."""

    encoding: EncodingName = Field(
        default="cl100k_base",
        description=(
            "Tokenizer encoding or model family name; exact where its tokenizer data is local, "
            "otherwise an offline estimate."
        ),
    )

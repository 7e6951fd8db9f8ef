"""Argument models of the artifact query methods (the tools' input schemas).

This module is the one place the artifact wing defines pydantic models, and nothing imports it
on ``import pipeline``: the tool methods that name these models are built on first read
(``_toolmethod.DeferredToolMethods``), so pydantic's model machinery loads with the first
forged tool (docs/architecture.md, "Import time").
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import InvalidToolArgsError
from ._grep import regex_module
from ._jsonpath import compile_jsonpath
from ._tokens import EncodingName

__all__ = [
    "ArgsModel",
    "CatArgs",
    "CountArgs",
    "DepthArgs",
    "GrepArgs",
    "LangArgs",
    "LineRangeArgs",
    "NoArgs",
    "PathArgs",
    "SliceArgs",
    "TokenArgs",
]


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


class GrepArgs(ArgsModel):
    """A per-line regular expression search."""

    pattern: str = Field(description="Python regular expression, matched against each line.")
    flags: str = Field(
        default="",
        pattern=r"^[imsu]*$",
        description=(
            "Any of 'i' (ignore case), 'm' (multiline), 's' (dot matches all), "
            "'u' (Unicode; always on)."
        ),
    )
    max_matches: int | None = Field(
        default=None, ge=1, description="Stop after this many matching lines (null: no limit)."
    )
    start_line: int = Field(
        default=0, ge=0, description="First line to search (0-based; default: the first)."
    )
    end_line: int | None = Field(
        default=None, ge=0, description="Line after the last one searched (null: to the end)."
    )

    @field_validator("pattern")
    @classmethod
    def _valid_regex(cls, value: str) -> str:
        module = regex_module()
        try:
            module.compile(value)
        except module.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from exc
        return value


class PathArgs(ArgsModel):
    """A JSONPath expression, and how many results to skip."""

    path: str = Field(description="JSONPath expression (extended syntax), e.g. $.items[0].name.")
    offset: int = Field(
        default=0, ge=0, description="Skip this many results (to read on past a capped result)."
    )

    @field_validator("path")
    @classmethod
    def _valid_path(cls, value: str) -> str:
        try:
            compile_jsonpath(value)
        except InvalidToolArgsError as exc:
            raise ValueError(exc.message) from None
        return value


class SliceArgs(ArgsModel):
    """A range of records with Python slice semantics."""

    start: int | None = Field(default=None, description="First record index (negative: from end).")
    end: int | None = Field(default=None, description="Index after the last record (exclusive).")


class DepthArgs(LineRangeArgs):
    """The deepest heading level to include, and the lines to look in."""

    depth: int = Field(default=6, ge=1, le=6, description="Deepest heading level (1 to 6).")


class LangArgs(LineRangeArgs):
    """An optional language filter, and the lines to look in."""

    lang: str | None = Field(default=None, description="Only blocks of this language (null: all).")

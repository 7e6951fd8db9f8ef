"""A tool whose parameters nest a pydantic model, for each host's test that it runs under the
policies: its JSON Schema has ``$defs`` and ``$ref``, which the host shows the model as is."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class Item(BaseModel):
    """An order line: the nested model."""

    name: str
    qty: int


ORDER_ARGS: dict[str, Any] = {"item": {"name": "tea", "qty": 2}, "note": "asap"}
"""What the model sends to ``order(item: Item, note: str)``, three times in each test."""
ORDERED = ["teax2:asap"]
"""The runs of ``order`` under a limit of 1: the first call only."""


def ordered(runs: list[str], item: Item, note: str) -> str:
    """Record one run of ``order`` and answer it."""
    runs.append(f"{item.name}x{item.qty}:{note}")
    return "ordered"

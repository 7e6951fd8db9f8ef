"""A plugin as a user writes it: `.ci/run` type-checks it from outside the repository.

Copied to a temporary directory and checked there with no MYPYPATH, it proves that the README's
``pip install -e '.[dev]'`` leaves `pipeline`, `middleware` and `loopware_cli` visible to mypy
(``pyproject.toml``, ``[tool.setuptools] package-dir``: a plain path ``.pth``, no import hook).
"""

from __future__ import annotations

from typing import assert_type

from pydantic import BaseModel

import loopware_cli
from middleware import Middleware
from pipeline import DispatchContext, Tool, tool


@tool
def shout(text: str) -> str:
    """Shout."""
    return text.upper()


policy = Middleware("policy")


@policy.dispatch_output
def report(ctx: DispatchContext) -> None:
    ctx.log.info("report", "done")


assert_type(shout, Tool[BaseModel])
assert_type(loopware_cli.main(["--version"]), int)

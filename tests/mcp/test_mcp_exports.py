"""`pipeline.mcp`'s public surface, and the rule that the core never imports the mcp SDK."""

from __future__ import annotations

import inspect
import subprocess
import sys
import types
from pathlib import Path

import pipeline.mcp

ROOT = Path(__file__).resolve().parents[2]


def _public(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"
    }


def test_all_is_sorted_exact_documented_and_reports_the_public_module() -> None:
    names = pipeline.mcp.__all__
    assert names == sorted(names)
    assert set(names) == _public(pipeline.mcp)
    for name in names:
        value = getattr(pipeline.mcp, name)
        assert inspect.isclass(value) or inspect.isfunction(value)
        assert value.__module__ == "pipeline.mcp", name
        assert (value.__doc__ or "").strip(), name


def test_importing_the_core_and_pipeline_mcp_never_imports_the_sdk() -> None:
    code = (
        "import sys, pipeline, middleware, pipeline.mcp, loopware_cli._main\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('mcp', 'mcp_types', 'jsonschema', 'anyio', 'uvicorn', 'starlette'))\n"
        "print(loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "[]"

"""`pipeline.mcp`'s public surface, and the rule that the core never imports the mcp SDK."""

from __future__ import annotations

import inspect
import subprocess
import sys
import types
from pathlib import Path

import pytest

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
        "('mcp', 'mcp_types', 'jsonschema', 'jsonschema_rs', 'anyio', 'uvicorn', 'starlette'))\n"
        "print(loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "[]"


SDK_USERS = sorted(
    [
        *(ROOT / "pipeline" / "mcp").glob("*.py"),
        *(ROOT / "loopware_cli").glob("_gateway*.py"),
        *(ROOT / "bench").glob("mcp_gateway*.py"),
    ]
)


def sdk_names(source: str) -> list[tuple[str, str]]:
    """Every ``(module, name)`` a source takes from the mcp SDK: ``from mcp... import name``,
    and ``alias.name`` after ``import mcp_types as alias`` (or any ``import mcp...``)."""
    import ast

    tree = ast.parse(source)
    found: list[tuple[str, str]] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in SDK:
            found += [(node.module or "", a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in SDK and a.asname is not None:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            found.append((aliases[node.value.id], node.attr))
    return found


SDK = ("mcp", "mcp_types")


def test_sdk_names_used_are_public_in_their_module() -> None:
    """Every SDK name loopware uses is in its module's ``__all__`` (or, in a module that
    declares none, a name without a leading underscore): no SDK internals."""
    import importlib

    pytest.importorskip("mcp")
    used = {pair for path in SDK_USERS for pair in sdk_names(path.read_text())}
    assert ("mcp", "stdio_server") in used  # the scan sees the gateway's imports
    bad = []
    for module_name, name in sorted(used):
        module = importlib.import_module(module_name)
        public = getattr(module, "__all__", None)
        if (public is not None and name not in public) or name.startswith("_"):
            bad.append(f"{module_name}.{name}")
    assert bad == []


def test_the_sdk_name_check_sees_a_private_helper() -> None:
    source = "from mcp.server.runner import modern_error_data\nimport mcp_types as t\nt.X\n"
    assert sdk_names(source) == [("mcp.server.runner", "modern_error_data"), ("mcp_types", "X")]

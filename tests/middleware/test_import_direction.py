"""The package boundary: `middleware` uses only `pipeline`'s public API, never the reverse."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import middleware
import pipeline

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> list[tuple[str, int]]:
    """Every absolute module an import statement in ``path`` names, with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, node.lineno))
            found.extend(
                (f"{node.module}.{alias.name}", node.lineno)
                for alias in node.names
                if node.module == "pipeline"
            )
    return found


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", sources("middleware"), ids=lambda p: p.name)
def test_middleware_imports_only_public_pipeline_names(path: Path) -> None:
    """No `pipeline._private` module (or private name) is imported by `middleware`."""
    bad = [
        (module, line)
        for module, line in imported_modules(path)
        if module.startswith("pipeline.") and module.split(".")[1].startswith("_")
    ]
    assert bad == []


@pytest.mark.parametrize("path", sources("pipeline"), ids=lambda p: p.name)
def test_pipeline_never_imports_middleware(path: Path) -> None:
    """The dependency points one way: `pipeline` knows nothing of `middleware`."""
    bad = [
        (module, line)
        for module, line in imported_modules(path)
        if module == "middleware" or module.startswith("middleware.")
    ]
    assert bad == []


def test_the_scan_sees_both_packages() -> None:
    """Guard against an empty parametrization hiding a broken path."""
    assert len(sources("middleware")) > 5
    assert len(sources("pipeline")) > 5


def test_middleware_exports_exactly_its_public_names() -> None:
    """`middleware.__all__` is sorted and equals the public names the package defines."""
    for name in middleware.__all__:  # the replay engine's names load on first use
        getattr(middleware, name)
    public = {name for name in vars(middleware) if not name.startswith("_")}
    public -= {name for name, value in vars(middleware).items() if inspect.ismodule(value)}
    assert set(middleware.__all__) == public
    assert middleware.__all__ == sorted(middleware.__all__, key=lambda n: (not n[0].isupper(), n))


@pytest.mark.parametrize("name", middleware.__all__)
def test_public_names_report_the_public_module(name: str) -> None:
    """Reprs and tracebacks say `middleware.X`, never the private module."""
    value = getattr(middleware, name)
    if inspect.isclass(value) or inspect.isfunction(value):
        assert value.__module__ == "middleware"


def test_pipeline_exports_what_middleware_needs() -> None:
    """The names this package builds on are part of pipeline's public API."""
    for name in ("DispatchContext", "TurnContext"):
        assert name in pipeline.__all__
    for name in ("CallNext", "Stage", "MiddlewareSpec", "MiddlewareProvider", "MethodRegistration",
                 "EventObserver"):
        assert name in pipeline.stages.__all__

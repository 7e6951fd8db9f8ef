"""The public surface: which modules are public, how many names each exports, and that every
public name lives in exactly one of them (docs/architecture.md, "The layers").

A public module is a package or module whose dotted path has no component starting with ``_``.
Each public module's `__all__` is exact and sorted, and every class or function it exports
reports that module, so a repr, a traceback or a pickle names the one place to import it from.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types
import typing
from collections import defaultdict

import pytest

ROOTS = ("pipeline", "middleware", "loopware_cli")

SURFACE = {
    "pipeline": 21,
    "pipeline.artifacts": 15,
    "pipeline.calls": 12,
    "pipeline.durable": 14,
    "pipeline.errors": 45,
    "pipeline.hosted": 7,
    "pipeline.events": 20,
    "pipeline.mcp": 6,
    "pipeline.models": 16,
    "pipeline.stages": 14,
    "pipeline.stores": 17,
    "pipeline.testing": 3,
    "middleware": 34,
    "middleware.adapters": 0,
    "middleware.adapters.adk": 1,
    "middleware.adapters.langchain": 2,
    "middleware.adapters.openai_agents": 1,
    "middleware.adapters.pydantic_ai": 1,
    "middleware.audit": 16,
    "middleware.transcripts": 16,
    "loopware_cli": 1,
}
"""The public modules and how many names each exports. A change here is a change to the public
surface: say so in CHANGELOG.md."""

PACKAGES = list(SURFACE)


def _public_modules() -> list[str]:
    """Every public module under the roots, found by walking the packages on disk."""
    found: list[str] = []

    def walk(name: str) -> None:
        found.append(name)
        module = importlib.import_module(name)
        for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
            if not info.name.startswith("_"):
                walk(f"{name}.{info.name}")

    for root in ROOTS:
        walk(root)
    return found


def _public(module: types.ModuleType) -> set[str]:
    """The public names the module holds, those it loads on first use resolved first."""
    for name in dir(module):  # a deferred name enters vars() when first asked for
        getattr(module, name)
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name not in {"annotations", "TYPE_CHECKING"}
        and value is not getattr(typing, name, None)
    }


def test_the_public_modules_and_their_name_counts_are_the_pinned_surface() -> None:
    """The public modules are exactly those pinned, each exporting the pinned number of names:
    a name added, moved or removed shows up here."""
    modules = _public_modules()
    assert sorted(modules) == sorted(SURFACE)
    counts = {name: len(importlib.import_module(name).__all__) for name in modules}
    assert counts == SURFACE


def test_every_public_name_is_importable_from_exactly_one_public_module() -> None:
    """No name is importable from two public modules: no forwarded copy at the top of a
    package, no second re-export list, no implementation module that leaks what it imports."""
    homes: defaultdict[str, list[str]] = defaultdict(list)
    modules = _public_modules()
    exported = {name for module in modules for name in importlib.import_module(module).__all__}
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in exported & (_public(module) | set(module.__all__)):
            homes[name].append(module_name)
    assert {name: where for name, where in homes.items() if len(where) > 1} == {}
    assert set(homes) == exported


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_sorted_and_names_only_what_exists(package: str) -> None:
    """`__all__` is sorted and every name in it is an attribute of the module."""
    module = importlib.import_module(package)
    assert sorted(module.__all__) == module.__all__
    assert all(hasattr(module, name) for name in module.__all__)


@pytest.mark.parametrize("package", PACKAGES)
def test_all_lists_exactly_the_public_names(package: str) -> None:
    """`__all__` holds every public attribute and nothing else (sub-packages aside)."""
    module = importlib.import_module(package)
    assert set(module.__all__) == _public(module)


@pytest.mark.parametrize("package", PACKAGES)
def test_public_classes_and_functions_report_the_module_that_exports_them(package: str) -> None:
    """Reprs, tracebacks and pickles name the public module a class or function is imported
    from (``pipeline.calls.ToolCall``), never the private module that defines it."""
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__ == package, f"{package}.{name} reports {value.__module__}"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_is_documented(package: str) -> None:
    """Every exported class and function carries a docstring."""
    module = importlib.import_module(package)
    assert (module.__doc__ or "").strip()
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert (value.__doc__ or "").strip(), f"{package}.{name} has no docstring"

"""The public surface: each public module's `__all__` is exact and sorted, every public name
reports a public module, and names that moved into sub-packages keep their old import path."""

from __future__ import annotations

import importlib
import inspect
import types
import typing

import pytest

PACKAGES = [
    "pipeline",
    "pipeline.artifacts",
    "pipeline.calls",
    "pipeline.durable",
    "pipeline.errors",
    "pipeline.events",
    "pipeline.models",
    "pipeline.stages",
    "pipeline.stores",
    "middleware",
    "middleware.audit",
    "middleware.transcripts",
    "loopware_cli",
]
NEW_WINGS = {"pipeline.durable"}
"""Sub-packages whose names never lived in `pipeline` (nothing moved, so no old import path)."""
SUBPACKAGES = [p for p in PACKAGES if p.startswith("pipeline.") and p not in NEW_WINGS]


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


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_sorted_and_names_only_what_exists(package: str) -> None:
    """`__all__` is sorted and every name in it is an attribute of the module."""
    module = importlib.import_module(package)
    assert sorted(module.__all__) == module.__all__
    assert all(hasattr(module, name) for name in module.__all__)


@pytest.mark.parametrize("package", [p for p in PACKAGES if p != "pipeline"])
def test_all_lists_exactly_the_public_names(package: str) -> None:
    """Outside the top level, `__all__` holds every public attribute and nothing else."""
    module = importlib.import_module(package)
    assert set(module.__all__) == _public(module)


def test_the_top_level_is_the_core_plus_old_import_paths() -> None:
    """`pipeline.__all__` is the core (at most ~60 names); every other public attribute of
    `pipeline` is a name a public sub-package exports, kept for its old import path."""
    import pipeline

    assert len(pipeline.__all__) <= 60
    exported_below = set()
    for sub in SUBPACKAGES:
        exported_below |= set(importlib.import_module(sub).__all__)
    extra = _public(pipeline) - set(pipeline.__all__)
    assert extra <= exported_below, extra - exported_below


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_names_that_moved_keep_their_old_import_path(package: str) -> None:
    """Everything a sub-package exports is also importable from `pipeline`, as before."""
    import pipeline

    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(pipeline, name) is getattr(module, name), name


@pytest.mark.parametrize("package", PACKAGES)
def test_public_classes_report_a_public_module(package: str) -> None:
    """Reprs and tracebacks show `pipeline.X` / `middleware.X`, not the private module."""
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__ in {"pipeline", "middleware", "loopware_cli", *NEW_WINGS}, (
                f"{package}.{name} reports {value.__module__}"
            )


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_is_documented(package: str) -> None:
    """Every exported class and function carries a docstring."""
    module = importlib.import_module(package)
    assert (module.__doc__ or "").strip()
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert (value.__doc__ or "").strip(), f"{package}.{name} has no docstring"

"""The public surface: `__all__` is exact, sorted, and every public name reports its package."""

from __future__ import annotations

import importlib
import inspect
import types

import pytest

PACKAGES = ["pipeline", "middleware"]


@pytest.mark.parametrize("package", PACKAGES)
def test_all_lists_exactly_the_public_names(package: str) -> None:
    """`__all__` holds every public attribute of the package and nothing else, sorted."""
    module = importlib.import_module(package)
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
        and name != "annotations"
    }
    assert sorted(module.__all__) == module.__all__
    assert set(module.__all__) == public


@pytest.mark.parametrize("package", PACKAGES)
def test_public_classes_report_their_public_module(package: str) -> None:
    """Reprs and tracebacks show `pipeline.X`, not the private module that defines it."""
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__ == package, f"{package}.{name} reports {value.__module__}"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_is_documented(package: str) -> None:
    """Every exported class and function carries a docstring."""
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert (value.__doc__ or "").strip(), f"{package}.{name} has no docstring"

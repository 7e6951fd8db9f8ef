"""Names a package exports but loads on first use (docs/architecture.md, "Import time").

The provider models, the durable stores and the JSON and Markdown artifacts pull in SDKs,
database drivers and parsers; ``import pipeline`` must not. Their packages name them in
``__all__`` (and import them under ``TYPE_CHECKING`` for type checkers), and get their module
``__getattr__`` and ``__dir__`` from `lazy_exports`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for its names loaded on first use.

    Args:
        package: The package's ``__name__``.
        homes: Each lazily loaded name, and the private module of the package that defines it.
        namespace: The package's ``globals()``: a name is kept there once loaded, so later
            reads never reach ``__getattr__`` again.
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__

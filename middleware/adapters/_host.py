"""How an adapter's public module loads its host's SDK: on first use, or a `MissingExtraError`.

Each public module of `middleware.adapters` names its host's SDK (``pydantic_ai``, ...) only in
a private module; `lazy_host` gives the public module the ``__getattr__`` and ``__dir__`` that
import that private module when a name is first read. A host that is not installed is reported
as every missing extra is (``pip install 'loopware[X]'``, code ``E_MISSING_EXTRA``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from pipeline.errors import MissingExtraError

__all__ = ["lazy_host"]


def lazy_host(
    public: str, private: str, names: Sequence[str], *, hosts: tuple[str, ...], extra: str
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the adapter module ``public``.

    Reading one of ``names`` imports ``private`` (the module that imports the host) and keeps
    the value in ``public``'s namespace, so the import happens once.

    Raises (from the ``__getattr__``):
        AttributeError: a name ``public`` does not export.
        MissingExtraError: the host (a module under one of ``hosts``) is not installed.
    """
    exported = frozenset(names)

    def __getattr__(name: str) -> Any:
        if name not in exported:
            raise AttributeError(f"module {public!r} has no attribute {name!r}")
        try:
            module = importlib.import_module(private)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if not missing.split(".")[0].startswith(hosts):
                raise
            raise MissingExtraError(extra=extra, package=missing, needed_by=name) from exc
        value = getattr(module, name)
        setattr(importlib.import_module(public), name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(importlib.import_module(public)), *exported})

    return __getattr__, __dir__

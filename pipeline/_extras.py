"""Importing an optional extra's package: the one way a missing extra is reported.

Provider SDKs, DBOS, the MCP SDK and psycopg are imported when a feature is first used, never
at ``import pipeline``. Each such import goes through `import_extra`, so a core install gets a
`MissingExtraError` naming the ``pip install 'loopware[X]'`` that fixes it (the CLI prints it
as one line and exits 7), not a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from .errors import MissingExtraError

__all__ = ["import_extra", "require_extra"]


def import_extra(module: str, extra: str, needed_by: str) -> ModuleType:
    """Import ``module`` from the extra ``extra``, or raise `MissingExtraError`.

    Raises:
        MissingExtraError: ``module`` cannot be imported; ``extra``, ``package`` and
            ``needed_by`` say what to install for what.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(extra=extra, package=module, needed_by=needed_by) from exc


def require_extra(module: str, extra: str, needed_by: str) -> None:
    """Check that ``module`` can be found, without importing it.

    For a class built long before it connects, whose construction must stay cheap.

    Raises:
        MissingExtraError: ``module`` is not installed.
    """
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken parent package, a module without a spec
        found = False
    if not found:
        raise MissingExtraError(extra=extra, package=module, needed_by=needed_by)

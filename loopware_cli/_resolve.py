"""Resolving ``module:attr`` command-line targets into middleware or a runner.

The current directory is importable while a target is imported (as with ``python -m``), so
``loopware replay t.json --middleware my_policies:stack`` finds ``./my_policies.py``.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable
from typing import Any, Final

from pipeline import Tool, ToolRegistry, TurnRunner
from pipeline.errors import (
    InvalidMiddlewareConfigError,
    InvalidRunnerConfigError,
    LoopError,
    MissingExtraError,
)
from pipeline.stages import EventObserver, MiddlewareProvider

__all__ = ["is_middleware", "resolve_middleware", "resolve_runner", "resolve_tools"]

_SPEC: Final = re.compile(
    r"(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<attr>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)"
)
_ACCEPTS_MIDDLEWARE: Final = (
    "a Middleware set, a middleware instance, a list of them, or a zero-argument factory "
    "returning one of those"
)

ErrorType = type[InvalidMiddlewareConfigError] | type[InvalidRunnerConfigError]


def _import_target(spec: str, error: ErrorType) -> object:
    match = _SPEC.fullmatch(spec)
    if match is None:
        raise error(f"{spec!r} is not of the form module:attr (e.g. my_policies:stack)", spec=spec)
    module_name, attr_path = match["module"], match["attr"]
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except MissingExtraError:  # told once, by main(): exit 7
        raise
    except Exception as exc:
        raise error(
            f"cannot import module {module_name!r} (from {spec!r}): {type(exc).__name__}: {exc}",
            spec=spec,
        ) from exc
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)
    target: object = module
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise error(
                f"{spec!r}: {type(target).__name__} {getattr(target, '__name__', '?')!r} has no "
                f"attribute {part!r}",
                spec=spec,
            ) from exc
    return target


def _call_factory(spec: str, factory: Callable[[], object], error: ErrorType) -> object:
    try:
        inspect.signature(factory).bind()
    except TypeError as exc:
        raise error(f"{spec!r} cannot be called without arguments ({exc})", spec=spec) from exc
    except ValueError:  # no signature available (some builtins): just try the call
        pass
    try:
        return factory()
    except MissingExtraError:  # told once, by main(): exit 7
        raise
    except LoopError as exc:
        raise error(f"{spec!r} raised {exc}", spec=spec) from exc
    except Exception as exc:
        raise error(f"{spec!r} raised {type(exc).__name__}: {exc}", spec=spec) from exc


def is_middleware(value: object) -> bool:
    """True for what ``TurnRunner(middleware=[...])`` accepts as one item."""
    if isinstance(value, type):
        return False
    if isinstance(value, (MiddlewareProvider, EventObserver)):
        return True
    return any(
        getattr(attr, "__loopware_registrations__", None)
        for klass in type(value).__mro__
        for attr in vars(klass).values()
    )


def _as_items(value: object) -> list[object] | None:
    if is_middleware(value):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(is_middleware(v) for v in value):
        return list(value)
    return None


def resolve_middleware(spec: str) -> list[object]:
    """Resolve a ``--middleware module:attr`` value into middleware items.

    Raises:
        InvalidMiddlewareConfigError: the spec is malformed, the module cannot be imported, the
            attribute is missing, or it is not middleware (nor a factory of middleware).
    """
    error = InvalidMiddlewareConfigError
    target = _import_target(spec, error)
    items = _as_items(target)
    if items is not None:
        return items
    if not callable(target):
        raise error(
            f"{spec!r} is {type(target).__name__} {target!r}, not middleware: expected "
            f"{_ACCEPTS_MIDDLEWARE}",
            spec=spec,
        )
    made = _call_factory(spec, target, error)
    items = _as_items(made)
    if items is None:
        raise error(
            f"{spec!r} returned {type(made).__name__} {made!r}, which is not middleware: expected "
            f"{_ACCEPTS_MIDDLEWARE}",
            spec=spec,
        )
    return items


def resolve_runner(spec: str) -> TurnRunner:
    """Resolve a ``module:attr`` value into a `TurnRunner` (or call a zero-argument factory).

    Raises:
        InvalidRunnerConfigError: the spec is malformed, the module cannot be imported, the
            attribute is missing, or it is neither a runner nor a factory returning one.
    """
    error = InvalidRunnerConfigError
    target = _import_target(spec, error)
    if isinstance(target, TurnRunner):
        return target
    if not callable(target):
        raise error(
            f"{spec!r} is {type(target).__name__}, not a TurnRunner or a zero-argument factory "
            "returning one",
            spec=spec,
        )
    made = _call_factory(spec, target, error)
    if not isinstance(made, TurnRunner):
        raise error(f"{spec!r} returned {type(made).__name__}, not a TurnRunner", spec=spec)
    return made


def _as_tools(value: object) -> list[Tool[Any]] | None:
    if isinstance(value, Tool):
        return [value]
    if isinstance(value, ToolRegistry):
        return value.all()
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Tool) for v in value):
        return list(value)
    return None


def resolve_tools(spec: str) -> list[Tool[Any]]:
    """Resolve a ``--tools module:attr`` value into tools.

    It names a `Tool`, a list of tools, a `ToolRegistry`, or a zero-argument factory returning
    one of those.

    Raises:
        InvalidRunnerConfigError: the spec is malformed, the module cannot be imported, the
            attribute is missing, or it is not tools (nor a factory of tools).
    """
    error = InvalidRunnerConfigError
    target = _import_target(spec, error)
    tools = _as_tools(target)
    if tools is not None:
        return tools
    if not callable(target):
        raise error(
            f"{spec!r} is {type(target).__name__}, not a Tool or a list of tools", spec=spec
        )
    made = _call_factory(spec, target, error)
    tools = _as_tools(made)
    if tools is None:
        raise error(
            f"{spec!r} returned {type(made).__name__}, not a Tool or a list of tools", spec=spec
        )
    return tools

"""The configuration file of ``loopware worker`` (TOML) and what it builds.

::

    system_database = "sqlite:///loopware-system.sqlite"   # or postgresql://user@host/db
    queue = "loopware-turns"
    concurrency = 8
    executor_id = "worker-1"          # optional; a restarted worker with this id resumes its turns
    recover = ["worker-0"]            # optional; put these dead workers' turns back on the queue
    poll_interval = 1.0

    [runner]
    model = "openai:gpt-4.1-mini"     # a model string, or model_from = "my_app:model"
    tools = ["my_app:TOOLS"]
    middleware = ["my_app:stack"]
    store = "sqlite:agent.db"         # "memory", "sqlite:PATH", a postgresql:// URL,
                                      # or store_from = "my_app:store"
    spool = "spool"                   # a FileSpoolStore directory (the default with PostgreSQL)
    system_prompt = "You are ..."
    max_iterations = 50
    tool_threads = 40                 # sync tool handlers running at once, in worker threads
    rerun_interrupted = ["fetch_*"]   # idempotent tools a crash may run again (default: none)

Relative paths are relative to the file's directory; ``module:attr`` names import with the
current directory importable (as ``loopware run`` does).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pipeline import Tool, ToolThreads
from pipeline.durable import DEFAULT_QUEUE, DEFAULT_SYSTEM_DATABASE, DurableConfigError
from pipeline.stores import FileSpoolStore, MemoryStore, SpoolStore, SqliteStore, TurnStore

from ._resolve import resolve_middleware, resolve_tools

__all__ = [
    "WorkerConfig",
    "build_runner_options",
    "build_store",
    "read_worker_config",
    "resolve_object",
]

_TOP: Final = frozenset(
    {
        "system_database",
        "queue",
        "concurrency",
        "executor_id",
        "recover",
        "poll_interval",
        "app_name",
        "runner",
    }
)
_RUNNER: Final = frozenset(
    {
        "model",
        "model_from",
        "tools",
        "middleware",
        "store",
        "store_from",
        "spool",
        "system_prompt",
        "max_iterations",
        "tool_threads",
        "rerun_interrupted",
    }
)


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """A worker's configuration, as read from its file (nothing imported yet)."""

    path: Path
    """The file it was read from."""
    system_database: str = DEFAULT_SYSTEM_DATABASE
    """The DBOS system database URL."""
    queue: str = DEFAULT_QUEUE
    """The queue's name."""
    concurrency: int = 8
    """How many turns this worker runs at once."""
    executor_id: str | None = None
    """This worker's id (DBOS's default when None)."""
    recover: tuple[str, ...] = ()
    """Dead workers whose unfinished turns this one puts back on the queue at start."""
    poll_interval: float = 1.0
    """Seconds between looks at the queue."""
    app_name: str = "loopware"
    """The DBOS application name."""
    runner: dict[str, Any] = field(default_factory=dict)
    """The ``[runner]`` table."""


def _bad(path: Path, message: str) -> DurableConfigError:
    return DurableConfigError(f"{path}: {message}", field=message.split(" ", 1)[0])


def _text(path: Path, table: dict[str, Any], key: str) -> str | None:
    value = table.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise _bad(path, f"{key} must be a non-empty string, got {value!r}")
    return value


def _texts(path: Path, table: dict[str, Any], key: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _bad(path, f"{key} must be a string or a list of strings, got {value!r}")
    return tuple(value)


def read_worker_config(path: str | os.PathLike[str]) -> WorkerConfig:
    """Read and check a worker's TOML file (unknown keys are errors: a typo must not pass).

    Raises:
        DurableConfigError: the file is missing, not TOML, or a value is malformed.
    """
    where = Path(path)
    try:
        data = tomllib.loads(where.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise _bad(where, f"cannot be read ({exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise _bad(where, f"is not valid TOML ({exc})") from exc
    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise _bad(where, f"unknown keys {unknown}; expected some of {sorted(_TOP)}")
    runner = data.get("runner", {})
    if not isinstance(runner, dict):
        raise _bad(where, "[runner] must be a table")
    unknown = sorted(set(runner) - _RUNNER)
    if unknown:
        raise _bad(where, f"unknown [runner] keys {unknown}; expected some of {sorted(_RUNNER)}")
    concurrency = data.get("concurrency", 8)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise _bad(where, f"concurrency must be an int >= 1, got {concurrency!r}")
    poll = data.get("poll_interval", 1.0)
    if isinstance(poll, bool) or not isinstance(poll, int | float) or not 0 < poll <= 60:
        raise _bad(where, f"poll_interval must be a number of seconds in (0, 60], got {poll!r}")
    database = _text(where, data, "system_database") or DEFAULT_SYSTEM_DATABASE
    if database.startswith("sqlite:///") and not database.startswith("sqlite:////"):
        database = "sqlite:///" + str(where.parent / database.removeprefix("sqlite:///"))
    return WorkerConfig(
        path=where,
        system_database=database,
        queue=_text(where, data, "queue") or DEFAULT_QUEUE,
        concurrency=concurrency,
        executor_id=_text(where, data, "executor_id"),
        recover=_texts(where, data, "recover"),
        poll_interval=float(poll),
        app_name=_text(where, data, "app_name") or "loopware",
        runner=dict(runner),
    )


def resolve_object(spec: str) -> object:
    """Import ``module:attr`` (calling it when it is a zero-argument factory function).

    Raises:
        DurableConfigError: the spec is malformed or cannot be imported.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise DurableConfigError(f"{spec!r} is not of the form module:attr", field="spec")
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        target: object = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except Exception as exc:
        raise DurableConfigError(
            f"cannot import {spec!r}: {type(exc).__name__}: {exc}", field="spec"
        ) from exc
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)
    if inspect.isfunction(target) and not inspect.signature(target).parameters:
        return target()  # a zero-argument factory
    return target


def build_store(config: WorkerConfig, spool: SpoolStore | None) -> TurnStore:
    """The `TurnStore` the ``[runner]`` table names (default `MemoryStore`).

    A PostgreSQL store keeps artifact bodies in ``spool`` (the runner's).
    """
    runner, where = config.runner, config.path
    source = _text(where, runner, "store_from")
    if source is not None:
        store = resolve_object(source)
        if not callable(getattr(store, "save_tool_call", None)):
            raise _bad(where, f"store_from {source!r} is not a TurnStore")
        return store  # type: ignore[return-value]  # checked for the protocol's methods above
    spec = _text(where, runner, "store") or "memory"
    if spec == "memory":
        return MemoryStore()
    if spec.startswith("sqlite:"):
        return SqliteStore(where.parent / spec.removeprefix("sqlite:"))
    if spec.startswith(("postgresql://", "postgres://")) or " dbname=" in f" {spec}":
        from pipeline.stores import PostgresStore  # psycopg loads only when named

        return PostgresStore(spec, spool=spool or FileSpoolStore(where.parent / "spool"))
    raise _bad(
        where, f"store must be 'memory', 'sqlite:PATH' or a PostgreSQL URL, got {spec!r}"
    )


def build_runner_options(config: WorkerConfig) -> dict[str, Any]:
    """The keyword arguments of `DurableTurnRunner` the ``[runner]`` table gives.

    Raises:
        DurableConfigError: a value is malformed or names nothing importable.
        LoopError: a tools or middleware target is not what it must be.
    """
    runner, where = config.runner, config.path
    model: object = _text(where, runner, "model")
    source = _text(where, runner, "model_from")
    if (model is None) == (source is None):
        raise _bad(where, "[runner] needs exactly one of model (a model string) or model_from")
    if source is not None:
        model = resolve_object(source)
    tools: list[Tool[Any]] = []
    for spec in _texts(where, runner, "tools"):
        tools.extend(resolve_tools(spec))
    middleware: list[object] = []
    for spec in _texts(where, runner, "middleware"):
        middleware.extend(resolve_middleware(spec))
    spool_dir = _text(where, runner, "spool")
    store_spec = runner.get("store")
    if spool_dir is None and isinstance(store_spec, str) and not store_spec.startswith(
        ("memory", "sqlite:")
    ):
        spool_dir = "spool"  # workers sharing a PostgreSQL store share a spool directory
    spool = None if spool_dir is None else FileSpoolStore(where.parent / spool_dir)
    iterations = runner.get("max_iterations", 50)
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise _bad(where, f"max_iterations must be an int >= 1, got {iterations!r}")
    threads = runner.get("tool_threads", ToolThreads().size)  # the runner's default
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise _bad(where, f"tool_threads must be an int >= 1, got {threads!r}")
    return {
        "model": model,
        "tools": tools,
        "middleware": middleware,
        "store": build_store(config, spool),
        "spool": spool,
        "system_prompt": _text(where, runner, "system_prompt"),
        "max_iterations": iterations,
        "tool_threads": threads,
        "rerun_interrupted": _texts(where, runner, "rerun_interrupted"),
        "system_database": config.system_database,
        "queue": config.queue,
        "concurrency": config.concurrency,
        "executor_id": config.executor_id,
        "app_name": config.app_name,
        "poll_interval": config.poll_interval,
    }


"""``loopware console``: the audit trail and the pending approvals in the browser.

It serves the pages of ``loopware_cli/_console_app.py`` with uvicorn, on 127.0.0.1 by default;
an address that is not loopback needs ``--allow-remote`` (exit 4 without it, as ``loopware
gateway --http`` without ``[auth]``). At start it prints one URL with a random access token
(``?token=...``); the page trades it for a session cookie (``_console_auth.py``). A second
line gives the MCP gateway's ``[approval] webhook`` URL, with a second random token
(``_console_hooks.py``). Starlette,
Jinja2, uvicorn and python-multipart (the ``console`` extra) are imported when the command
runs: without them it prints the one missing-extra line and exits 7.
"""

from __future__ import annotations

import argparse
import getpass
import importlib
import ipaddress
import os
import secrets
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from pipeline.errors import LoopError, MissingExtraError

from ._audit import UnreadableLogError, add_log_arguments, open_log, read_key

if TYPE_CHECKING:
    from pipeline.durable import DurableClient
    from pipeline.stores import PostgresStore, SqliteStore

    from ._console_sources import ConsoleSources

__all__ = ["CONSOLE_DESCRIPTION", "add_console_arguments", "is_loopback", "run_console"]

_EXIT_OK: Final = 0
_EXIT_BAD_INPUT: Final = 3  # the log, the store or the system database cannot be opened
_EXIT_BAD_TARGET: Final = 4  # a non-loopback address without --allow-remote

_SHUTDOWN_WAIT: Final = 3  # seconds a stopping console waits for requests in flight

_EXTRA_MODULES: Final = ("starlette", "jinja2", "uvicorn", "multipart")

CONSOLE_DESCRIPTION: Final = """\
Serve a local web console over an audit log (SQLite, JSON Lines or PostgreSQL), a
turn store and a durable runner's gates: turns and their calls with every decision,
the chain's verification, and the gates turns wait on, to approve or reject with a
reason (each answer is recorded in the audit log as console:NAME). It binds to
127.0.0.1 and prints a URL with a random access token; open that URL once. It also
prints a webhook URL for `loopware gateway`'s [approval] webhook: the gateway's
approvals then wait on the same page. See docs/guides/console.md."""


def add_console_arguments(parser: argparse.ArgumentParser) -> None:
    """The description, options and handler of ``loopware console``."""
    parser.description = CONSOLE_DESCRIPTION
    parser.set_defaults(handler=run_console)
    parser.add_argument(
        "--audit",
        required=True,
        metavar="LOG",
        help="the audit log: an SQLite or JSON Lines file, or a postgresql:// URL",
    )
    add_log_arguments(parser)
    parser.add_argument(
        "--store",
        metavar="PATH|URL",
        help="the turn store (an SQLite file or a postgresql:// URL): result previews",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--config", metavar="FILE", help="a worker's TOML file (its gates)")
    where.add_argument("--db", metavar="URL", help="the durable system database URL")
    parser.add_argument("--queue", default=None, help="the durable queue")
    parser.add_argument("--host", default="127.0.0.1", help="the address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="the port (default 8765; 0: any)")
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="serve on an address that is not loopback (the token is still required)",
    )
    parser.add_argument(
        "--hook-token-env",
        metavar="VAR",
        default=None,
        help="read the gateway webhook's token from this environment variable (at least 32 "
        "characters), so the URL in the gateway's config survives a restart (default: a new "
        "random token at each start)",
    )
    parser.add_argument(
        "--as",
        dest="answerer",
        default=None,
        metavar="NAME",
        help="who answers gates here, as recorded (default: the OS user)",
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_extra() -> None:
    for module in _EXTRA_MODULES:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise MissingExtraError(
                extra="console", package=module, needed_by="loopware console"
            ) from exc


def _opener(args: argparse.Namespace, answerer: str) -> Callable[[], ConsoleSources]:
    """What opens the sources on the server's loop (run once before serving, to fail early)."""
    from ._console_sources import ConsoleSources

    def open_sources() -> ConsoleSources:
        sink = open_log(args.audit, chain=args.chain, key=read_key(args))
        store: SqliteStore | PostgresStore | None = None
        client: DurableClient | None = None
        try:
            store = _open_store(args.store) if args.store else None
            client = _open_client(args)
        except BaseException:
            sink.close()
            if store is not None:
                store.close()
            raise
        return ConsoleSources(sink=sink, store=store, client=client, answerer=answerer)

    return open_sources


def _open_store(where: str) -> SqliteStore | PostgresStore:
    if where.startswith(("postgresql://", "postgres://")):
        from pipeline.stores import MemorySpoolStore, PostgresStore

        return PostgresStore(where, spool=MemorySpoolStore())
    from pipeline.stores import SqliteStore

    return SqliteStore(where)


def _open_client(args: argparse.Namespace) -> DurableClient | None:
    if args.config is None and args.db is None:
        return None
    from pipeline.durable import DEFAULT_QUEUE, DurableClient

    from ._worker_config import read_worker_config

    if args.config is not None:
        config = read_worker_config(args.config)
        database, queue, app = config.system_database, config.queue, config.app_name
    else:
        database, queue, app = args.db, DEFAULT_QUEUE, "loopware"
    return DurableClient(database, queue=args.queue or queue, app_name=app)


def _os_user() -> str:
    """The user running the console (``console`` when the system cannot tell)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no LOGNAME/USER and no passwd entry (a bare container)
        return "console"


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(128)  # connections made once the URL is printed wait for the server
    return sock


_MIN_HOOK_TOKEN: Final = 32
"""The shortest hook token ``--hook-token-env`` accepts (``token_urlsafe(32)`` gives 43)."""


def _hook_token(variable: str | None) -> str:
    """The gateway webhook's token: from ``variable``, else a new random one.

    It is never the access token: it opens no session.

    Raises:
        ValueError: the variable is unset, or holds fewer than 32 characters.
    """
    if variable is None:
        return secrets.token_urlsafe(32)
    token = os.environ.get(variable, "").strip()
    if len(token) < _MIN_HOOK_TOKEN:
        state = "is not set" if not token else f"holds {len(token)} characters"
        raise ValueError(
            f"--hook-token-env {variable}: the variable {state}; give it a random token of at "
            f"least {_MIN_HOOK_TOKEN} characters (python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')"
        )
    return token


def run_console(args: argparse.Namespace) -> int:
    """The ``loopware console`` command."""
    if not is_loopback(args.host) and not args.allow_remote:
        print(
            f"loopware console: error: {args.host} is not a loopback address: anyone who can "
            "reach it could try the page; pass --allow-remote to serve there anyway (the token "
            "is still required; put TLS in front of it)",
            file=sys.stderr,
        )
        return _EXIT_BAD_TARGET
    _check_extra()
    import uvicorn

    from ._console_app import console_app
    from ._console_auth import ConsoleAuth
    from ._console_hooks import HOOK_PATH

    answerer = args.answerer or _os_user()
    open_sources = _opener(args, answerer)
    try:
        hook_token = _hook_token(args.hook_token_env)
        open_sources().close()  # fail here, with exit 3, not on the first page
        sock = _bind(args.host, args.port)
    except MissingExtraError:  # told once, by main(): exit 7
        raise
    except (UnreadableLogError, LoopError, OSError, ValueError) as exc:
        print(f"loopware console: error: {exc}", file=sys.stderr)
        return _EXIT_BAD_INPUT
    host, port = sock.getsockname()[:2]
    auth = ConsoleAuth(port)
    shown = f"[{host}]" if ":" in host else host
    hosts = ["*"] if args.allow_remote else ["127.0.0.1", "localhost", "[::1]", "::1", shown]
    app = console_app(
        open_sources, auth, answerer=answerer, allowed_hosts=hosts, hook_token=hook_token
    )
    print(f"loopware console: http://{shown}:{port}/?token={auth.token}", flush=True)
    print(
        f'loopware console: gateway webhook = "http://{shown}:{port}{HOOK_PATH}'
        f'?token={hook_token}"',
        flush=True,
    )
    # held webhook requests (the gateway's approvals) would hold a graceful shutdown until the
    # gateway's timeout: past a few seconds they are dropped, which the gateway takes as a no
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", timeout_graceful_shutdown=_SHUTDOWN_WAIT
    )
    uvicorn.Server(config).run(sockets=[sock])
    return _EXIT_OK

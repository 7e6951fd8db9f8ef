"""A throw-away PostgreSQL server for the tests (fixtures re-exported by ``tests/conftest.py``).

`pg_server` (session scoped) runs ``initdb`` and ``pg_ctl`` from the PostgreSQL binaries
(``pg_config --bindir``, else ``/usr/lib/postgresql/*/bin``) on a temporary directory, listening
on a Unix socket only, with trust authentication; it stops the server and removes the directory
at the end of the session. ``initdb`` refuses to run as root, so as root the cluster belongs to
the ``postgres`` user (created by the Debian packages) and is started through ``runuser``; the
tests connect over the socket as the database superuser ``postgres``.

Tests that need the server are skipped, with the reason, only where the binaries (or, as root,
the ``postgres`` user) are absent; CI installs them (``.ci/run``).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["ClusterUnavailable", "PgServer", "cluster", "find_bindir", "pg_conninfo", "pg_server"]

_counter = itertools.count()


def find_bindir() -> Path | None:
    """Return the directory holding ``initdb`` and ``pg_ctl``, or None when there is none."""
    candidates: list[str] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=10
            ).stdout.strip()
            candidates.append(out)
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(str(Path(initdb).resolve().parent))
    for folder in candidates:
        path = Path(folder)
        if (path / "initdb").is_file() and (path / "pg_ctl").is_file():
            return path
    return None


@dataclass(frozen=True)
class PgServer:
    """A running throw-away server."""

    socket_dir: Path
    """Where its Unix socket is (the ``host`` of a conninfo)."""
    port: int
    """The port naming the socket file."""
    user: str
    """The superuser to connect as."""

    def conninfo(self, dbname: str = "postgres") -> str:
        """Return a libpq connection string for ``dbname``."""
        return f"host={self.socket_dir} port={self.port} user={self.user} dbname={dbname}"

    def create_database(self, prefix: str = "test") -> str:
        """Create a fresh database and return its connection string."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(_counter)}"
        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.conninfo(name)

    def drop_database(self, conninfo: str) -> None:
        """Drop a database made by `create_database` (closing any connection left to it)."""
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        name = conninfo_to_dict(conninfo)["dbname"]
        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _runner(as_root: bool) -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if as_root else []


class ClusterUnavailable(RuntimeError):
    """The PostgreSQL binaries (or, as root, the ``postgres`` user) are missing."""


@contextlib.contextmanager
def cluster(*, fsync: bool = False) -> Iterator[PgServer]:
    """Run a throw-away PostgreSQL server for the ``with`` block (see the module docstring).

    It runs with ``fsync=off`` (nothing the tests check needs the disk) unless ``fsync`` (a
    benchmark of durable writes).

    Raises:
        ClusterUnavailable: what is needed to run one is missing (the reason says what).
        RuntimeError: ``initdb`` or ``pg_ctl`` failed (their output says why).
    """
    bindir = find_bindir()
    if bindir is None:
        raise ClusterUnavailable("PostgreSQL binaries (initdb, pg_ctl) are not installed")
    as_root = os.geteuid() == 0
    owner: pwd.struct_passwd | None = None
    if as_root:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            raise ClusterUnavailable(
                "running as root and there is no 'postgres' user to run initdb as"
            ) from None
        if shutil.which("runuser") is None:
            raise ClusterUnavailable("running as root and runuser is missing (needed for initdb)")
    root = Path(tempfile.mkdtemp(prefix="loopware-pg-"))
    if owner is not None:
        os.chown(root, owner.pw_uid, owner.pw_gid)
    data, log, port = root / "data", root / "server.log", 5432
    run = _runner(as_root)
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    try:
        subprocess.run(
            [*run, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
             "-E", "UTF8", "--no-sync"],
            check=True, capture_output=True, env=env, timeout=120,
        )
        options = f"-k {root} -p {port} -c listen_addresses='' -c max_connections=200"
        if not fsync:
            options += " -c fsync=off"
        subprocess.run(
            [*run, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
             "-o", options, "start"],
            check=True, capture_output=True, env=env, timeout=120,
        )
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or b"").decode(errors="replace")
        if log.exists():
            detail += log.read_text(errors="replace")
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"could not start the test PostgreSQL server: {detail}") from exc
    try:
        yield PgServer(root, port, "postgres")
    finally:
        subprocess.run(
            [*run, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True, env=env, timeout=120, check=False,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """Start a PostgreSQL server for the session (skips when the binaries are absent)."""
    pytest.importorskip("psycopg", reason="psycopg is not installed (extra: postgres)")
    try:
        with cluster() as server:
            yield server
    except ClusterUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def pg_conninfo(pg_server: PgServer) -> Iterator[str]:
    """A connection string to a fresh, empty database on the test server (dropped after)."""
    conninfo = pg_server.create_database()
    yield conninfo
    pg_server.drop_database(conninfo)

"""Optional dependencies stay optional: importing loopware never imports them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_importing_loopware_and_its_postgres_classes_never_imports_psycopg() -> None:
    """``import pipeline, middleware`` and naming the PostgreSQL classes load no psycopg."""
    code = (
        "import sys\n"
        "import pipeline, middleware, loopware_cli\n"
        "from pipeline.stores import PostgresStore\n"
        "from middleware.audit import PostgresAuditSink\n"
        "PostgresStore('dbname=x', spool=pipeline.stores.MemorySpoolStore())\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_pool')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout
    assert out.strip() == "[]"

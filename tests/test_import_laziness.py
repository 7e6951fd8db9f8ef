"""``import pipeline, middleware`` loads only the core (docs/architecture.md, "Import time"):
pydantic, wrapt, ``importlib.metadata``, ``sqlite3``, the provider models, the durable stores,
the JSON and Markdown artifacts, grep, the built-in middleware, the audit wing and the replay
engine load when first used, and every public name resolves in its one public module.

Each check runs in a fresh interpreter, so modules this test session already imported do not
count. These are behaviour tests: the import time itself is measured by
``python -m bench.import_time``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

DEFERRED = (
    "pydantic",
    "pydantic_core",
    "wrapt",
    "importlib.metadata",
    "sqlite3",
    "uuid",
    "html",
    "tempfile",
    "pipeline.artifacts._args",
    "pipeline.artifacts._base_tools",
    "pipeline.artifacts._grep",
    "pipeline.artifacts._json_artifact",
    "pipeline.artifacts._md_artifact",
    "pipeline.artifacts._tokens",
    "pipeline.models._anthropic",
    "pipeline.models._openai_chat",
    "pipeline.models._openai_responses",
    "pipeline.stores._file_spool",
    "pipeline.stores._postgres_store",
    "pipeline.stores._sqlite_store",
    "middleware._approval",
    "middleware._budget",
    "middleware._counter",
    "middleware._limit",
    "middleware._policy",
    "middleware._repetition",
    "middleware._token_budget",
    "middleware._tracing",
    "middleware.audit",
    "middleware.transcripts",
)
"""Modules ``import pipeline, middleware`` must not load."""


def run(code: str) -> object:
    """Run ``code`` in a fresh interpreter; return the JSON it printed last."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


def loaded_after(code: str) -> list[str]:
    """The modules of `DEFERRED` that ``code`` leaves imported."""
    report = f"print(json.dumps([m for m in {DEFERRED!r} if m in sys.modules]))"
    loaded = run(f"import json, sys\n{code}\n{report}")
    assert isinstance(loaded, list)
    return loaded


def test_importing_pipeline_and_middleware_loads_only_the_core() -> None:
    """None of the deferred modules is imported by ``import pipeline, middleware``."""
    assert loaded_after("import pipeline, middleware") == []


def test_importing_the_public_subpackages_loads_only_their_core() -> None:
    """The sub-packages users import directly defer the same modules."""
    code = "import pipeline.artifacts, pipeline.models, pipeline.stores, pipeline.events"
    assert loaded_after(code) == []


@pytest.mark.parametrize(
    ("statement", "loads"),
    [
        ("from pipeline.stores import SqliteStore", ["sqlite3", "pipeline.stores._sqlite_store"]),
        ("from pipeline.stores import PostgresStore", ["pipeline.stores._postgres_store"]),
        ("from pipeline.stores import FileSpoolStore", ["tempfile", "pipeline.stores._file_spool"]),
        ("from pipeline.models import AnthropicModel", ["pipeline.models._anthropic"]),
        ("from pipeline.models import OpenAIChatModel", ["pipeline.models._openai_chat"]),
        ("from pipeline.artifacts import SpooledJsonArtifact",
         ["pipeline.artifacts._json_artifact"]),
        ("from pipeline.artifacts import SpooledMarkdownArtifact",
         ["pipeline.artifacts._md_artifact"]),
        ("from middleware import ToolCallLimit", ["middleware._limit"]),
        ("from middleware import Tracing", ["middleware._tracing"]),
        ("from middleware import ApprovalGate", ["middleware._approval"]),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_a_deferred_name_loads_its_own_module_and_no_other(
    statement: str, loads: list[str]
) -> None:
    """Naming one deferred class loads its module (and what it needs), not pydantic, the audit
    wing or the replay engine."""
    loaded = loaded_after(statement)
    assert set(loads) <= set(loaded)
    assert not {"pydantic", "middleware.audit", "middleware.transcripts"} & set(loaded)


def test_the_audit_wing_loads_sqlite_when_named() -> None:
    """``from middleware.audit import AuditLog`` loads the audit wing (its default sink is
    SQLite)."""
    loaded = loaded_after("from middleware.audit import AuditLog")
    assert {"middleware.audit", "sqlite3"} <= set(loaded)
    assert "pydantic" not in loaded


def test_pydantic_loads_with_the_first_tool_and_validates_it() -> None:
    """The first `@tool` imports pydantic; its arguments are then validated as before."""
    code = """
import pipeline
before = "pydantic" in sys.modules

@pipeline.tool
def add(a: int, b: int = 1) -> str:
    '''Add two integers.'''
    return str(a + b)

args = add.validate({"a": 2})
try:
    add.validate({"a": "2"})
    refused = None
except pipeline.errors.InvalidToolArgsError as exc:
    refused = exc.errors[0]["loc"]
print(json.dumps([before, "pydantic" in sys.modules, args.a + args.b, refused]))
"""
    assert run(f"import json, sys\n{code}") == [False, True, 3, ["a"]]


def test_query_tool_argument_models_are_built_on_first_read() -> None:
    """The query tools' pydantic argument models are built on the first read of
    ``tool_methods``; every read (a subclass's too) gets the same tuple, and the models
    validate as before."""
    code = """
import pipeline
from pipeline.artifacts import SpooledArtifact
before = "pipeline.artifacts._args" in sys.modules
first = SpooledArtifact.tool_methods
after = "pipeline.artifacts._args" in sys.modules
class Plain(SpooledArtifact):
    pass

same = first is SpooledArtifact.tool_methods and first is Plain.tool_methods
head = next(m for m in first if m.name == "artifact_head")
try:
    head.args_schema(n=-1)
    refused = False
except Exception:
    refused = True
print(json.dumps([before, after, same, head.args_schema().n, refused]))
"""
    assert run(f"import json, sys\n{code}") == [False, True, True, 10, True]


def test_every_exported_name_resolves_and_dir_lists_it_before_it_loads() -> None:
    """In a fresh interpreter, ``dir()`` lists every ``__all__`` name (deferred ones too), each
    resolves, and ``from package import *`` binds them all."""
    code = """
import importlib
missing = {}
for package in ("pipeline", "pipeline.artifacts", "pipeline.models", "pipeline.stores",
                "middleware", "middleware.audit"):
    module = importlib.import_module(package)
    unlisted = sorted(set(module.__all__) - set(dir(module)))
    namespace = {}
    exec(f"from {package} import *", namespace)
    unbound = sorted(set(module.__all__) - set(namespace))
    if unlisted or unbound:
        missing[package] = [unlisted, unbound]
print(json.dumps(missing))
"""
    assert run(f"import json, sys\n{code}") == {}


@pytest.mark.parametrize(
    "package", ["pipeline", "pipeline.artifacts", "pipeline.models", "pipeline.stores",
                "middleware"],
)
def test_an_unknown_name_is_still_an_attribute_error(package: str) -> None:
    """The deferred-name hook raises AttributeError for names the package does not have, so
    ``hasattr`` and ``getattr(..., default)`` keep working."""
    code = f"""
import importlib
module = importlib.import_module({package!r})
try:
    module.NoSuchName
    outcome = "resolved"
except AttributeError as exc:
    outcome = str(exc)
print(json.dumps([outcome, hasattr(module, "NoSuchName")]))
"""
    result = run(f"import json, sys\n{code}")
    assert isinstance(result, list)
    assert "NoSuchName" in result[0]
    assert result[1] is False


def test_the_middleware_subpackages_stay_reachable_as_attributes() -> None:
    """``middleware.audit`` and ``middleware.transcripts`` work after a bare ``import
    middleware``, as when the audit wing was imported eagerly, and load only when reached."""
    code = """
import middleware
before = [m for m in ("middleware.audit", "middleware.transcripts") if m in sys.modules]
sink = middleware.audit.SqliteAuditSink
replay = middleware.transcripts.replay
print(json.dumps([before, sink.__module__, replay.__module__]))
"""
    assert run(f"import json, sys\n{code}") == [[], "middleware.audit", "middleware.transcripts"]


CLI_DEFERRED = (
    "pipeline",
    "middleware",
    "pydantic",
    "importlib.metadata",
    "middleware.transcripts",
    "loopware_cli._replay",
    "loopware_cli._run",
    "loopware_cli._demo",
    "loopware_cli._worker",
    "loopware_cli._gateway_server",
)
"""What ``import loopware_cli`` and ``loopware --help`` must not load: a command's modules load
when that command runs (``loopware_cli/_main.py``)."""


def cli_loaded_after(code: str) -> list[str]:
    report = f"print(json.dumps([m for m in {CLI_DEFERRED!r} if m in sys.modules]))"
    loaded = run(f"import json, sys\n{code}\n{report}")
    assert isinstance(loaded, list)
    return loaded


def test_importing_the_cli_loads_no_command_and_neither_library() -> None:
    """``import loopware_cli`` loads its dispatcher only."""
    assert cli_loaded_after("import loopware_cli") == []


def test_loopware_help_lists_every_command_without_importing_any() -> None:
    """``loopware --help`` prints the commands from their one-line help alone."""
    code = (
        "import contextlib, io, loopware_cli\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    assert loopware_cli.main(['--help']) == 0\n"
        "assert all(f'    {c} ' in out.getvalue() for c in ('demo', 'replay', 'run', 'worker'))"
    )
    assert cli_loaded_after(code) == []


def test_a_command_loads_its_own_modules_only() -> None:
    """``replay --help`` loads the replay command; ``pipelines --help`` loads none of them."""
    code = (
        "import contextlib, io, loopware_cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert loopware_cli.main(['replay', '--help']) == 0\n"
    )
    assert "loopware_cli._replay" in cli_loaded_after(code)
    code = code.replace("'replay'", "'pipelines'")
    assert cli_loaded_after(code) == []

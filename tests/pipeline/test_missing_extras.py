"""A feature whose extra is not installed raises `MissingExtraError` naming the pip command."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from middleware import Tracing
from middleware.audit import PostgresAuditSink
from pipeline.durable import DurableClient
from pipeline.errors import ConfigurationError, MissingExtraError
from pipeline.models import infer_model
from pipeline.stores import MemorySpoolStore, PostgresStore


@pytest.mark.parametrize(
    ("hidden", "extra", "use"),
    [
        ("openai", "openai", lambda: infer_model("openai:gpt-4.1-mini")),
        ("openai", "openai", lambda: infer_model("openai-responses:gpt-4.1-mini")),
        ("anthropic", "anthropic", lambda: infer_model("anthropic:claude-sonnet-4-5")),
        ("dbos", "durable", lambda: DurableClient("sqlite:///never.sqlite")),
        (
            "psycopg",
            "postgres",
            lambda: PostgresStore("postgresql://h/db", spool=MemorySpoolStore()),
        ),
        ("psycopg", "postgres", lambda: PostgresAuditSink("postgresql://h/db")),
        ("opentelemetry", "otel", Tracing),
    ],
    ids=["openai", "openai-responses", "anthropic", "durable", "postgres-store", "postgres-audit",
         "otel"],
)
def test_using_a_feature_without_its_extra_raises_a_typed_error_naming_the_install(
    hidden: str, extra: str, use: Callable[[], object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setitem(sys.modules, hidden, None)
    with pytest.raises(MissingExtraError) as caught:
        use()
    error = caught.value
    assert error.code == "E_MISSING_EXTRA"
    assert error.extra == extra
    assert f"pip install 'loopware[{extra}]'" in error.message
    assert isinstance(error, ConfigurationError)
    assert isinstance(error, ImportError)  # code that caught the bare import error still does
    assert error.package == hidden


def test_the_message_names_what_needs_the_extra() -> None:
    error = MissingExtraError(extra="openai", package="openai", needed_by="an OpenAI model")
    assert str(error) == (
        "E_MISSING_EXTRA: an OpenAI model needs the openai extra: pip install 'loopware[openai]'"
    )

"""`loopware run` without what it needs says so clearly (the real turn is in tests/e2e)."""

from __future__ import annotations

import pytest

from loopware_cli._main import main


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("openai:gpt-4.1-mini", "OPENAI_API_KEY"),
        ("openai-responses:gpt-4.1-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ],
    ids=["openai", "openai-responses", "anthropic"],
)
def test_a_missing_key_names_the_variable_and_points_at_the_demo(
    spec: str, variable: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No key: exit 5, the variable to set, and `loopware demo` as the offline alternative."""
    monkeypatch.delenv(variable, raising=False)
    assert main(["run", "hello", "--model", spec]) == 5
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"set {variable}" in captured.err
    assert "loopware demo" in captured.err


def test_an_unknown_model_string_is_refused_with_the_accepted_forms(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A model string loopware does not know: exit 5, and the forms it does know."""
    assert main(["run", "hello", "--model", "gemini:pro"]) == 5
    err = capsys.readouterr().err
    assert "unknown provider 'gemini'" in err
    assert "openai-compatible:<name>@<base_url>" in err


def test_a_bad_tools_target_is_exit_4(capsys: pytest.CaptureFixture[str]) -> None:
    """--tools naming something that is not tools: exit 4 with the reason."""
    argv = ["run", "hi", "--model", "openai-compatible:m@http://127.0.0.1:9/v1"]
    assert main([*argv, "--tools", "pipeline:Stash"]) == 4
    assert "not a Tool or a list of tools" in capsys.readouterr().err

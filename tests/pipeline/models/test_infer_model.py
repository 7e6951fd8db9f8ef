"""`infer_model`: a model string names a `ChatModel` wherever a model is taken."""

from __future__ import annotations

import pytest

from pipeline import ToolLoopExecutor, TurnRunner
from pipeline.errors import InvalidRunnerConfigError, ModelAuthenticationError
from pipeline.models import (
    AnthropicModel,
    ModelRequest,
    ModelResponse,
    OpenAIChatModel,
    OpenAIResponsesModel,
    infer_model,
)

CREDENTIAL_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CONFIG_DIR",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_IDENTITY_TOKEN",
    "ANTHROPIC_IDENTITY_TOKEN_FILE",
    "ANTHROPIC_FEDERATION_RULE_ID",
    "ANTHROPIC_ORGANIZATION_ID",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    """No provider credentials, no profile on disk: each test sets what it needs."""
    for name in CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


class Canned:
    """A hand-written ChatModel."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="canned")


@pytest.mark.usefixtures("keys")
def test_anthropic_strings_build_an_anthropic_model_with_the_settings() -> None:
    """``anthropic:<model>`` builds `AnthropicModel`; settings go to its constructor."""
    model = infer_model("anthropic:claude-sonnet-4-5", max_tokens=1024)
    assert isinstance(model, AnthropicModel)
    assert (model.model, model.max_tokens) == ("claude-sonnet-4-5", 1024)
    assert model.client.api_key == "sk-ant-test"


@pytest.mark.usefixtures("keys")
def test_openai_strings_build_the_chat_and_responses_models() -> None:
    """``openai:`` is chat completions, ``openai-responses:`` the Responses API."""
    chat = infer_model("openai:gpt-4.1-mini")
    assert isinstance(chat, OpenAIChatModel)
    assert (chat.model, chat.provider) == ("gpt-4.1-mini", "openai")
    responses = infer_model("openai-responses:gpt-4.1")
    assert isinstance(responses, OpenAIResponsesModel)
    assert responses.model == "gpt-4.1"


@pytest.mark.parametrize(
    ("key", "sent"), [(None, "not-needed"), ("sk-local", "sk-local")], ids=["no-key", "env-key"]
)
def test_openai_compatible_strings_name_the_model_and_the_server(
    monkeypatch: pytest.MonkeyPatch, key: str | None, sent: str
) -> None:
    """``openai-compatible:<name>@<base_url>``: an OpenAI chat model on that server; the key is
    OPENAI_API_KEY when set, else a placeholder (local servers need none)."""
    if key is not None:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    model = infer_model("openai-compatible:llama3.2@http://localhost:11434/v1")
    assert isinstance(model, OpenAIChatModel)
    assert (model.model, model.provider) == ("llama3.2", "openai-compatible")
    assert str(model.client.base_url).rstrip("/") == "http://localhost:11434/v1"
    assert model.client.api_key == sent


def test_a_chat_model_is_returned_as_it_is() -> None:
    """Anything with ``complete`` is already a model."""
    model = Canned()
    assert infer_model(model) is model


BAD_SPECS = {
    "no-provider": "gpt-4.1-mini",
    "no-name": "anthropic:",
    "unknown-provider": "mistral:large",
    "compatible-without-url": "openai-compatible:llama3.2",
    "compatible-without-name": "openai-compatible:@http://localhost:8000/v1",
    "compatible-url-without-scheme": "openai-compatible:llama3.2@localhost:8000",
}


@pytest.mark.parametrize("spec", list(BAD_SPECS.values()), ids=list(BAD_SPECS))
def test_other_strings_are_refused_naming_the_accepted_forms(spec: str) -> None:
    """A string of no accepted form raises InvalidRunnerConfigError (field "model") listing
    the forms."""
    with pytest.raises(InvalidRunnerConfigError) as caught:
        infer_model(spec)
    assert caught.value.field == "model"
    for form in ("openai:<model>", "anthropic:<model>", "openai-compatible:<name>@<base_url>"):
        assert form in caught.value.message


def test_a_non_model_and_settings_with_a_model_object_are_refused() -> None:
    """An object without ``complete``, or settings that would be ignored, are refused."""
    with pytest.raises(InvalidRunnerConfigError, match="ChatModel"):
        infer_model(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidRunnerConfigError, match="max_tokens"):
        infer_model(Canned(), max_tokens=5)


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("openai:gpt-4.1-mini", "OPENAI_API_KEY"),
    ],
    ids=["anthropic", "openai"],
)
def test_a_missing_api_key_names_the_variable_to_set(spec: str, variable: str) -> None:
    """No key anywhere: ModelAuthenticationError, naming the environment variable to set."""
    with pytest.raises(ModelAuthenticationError, match=variable):
        infer_model(spec)


@pytest.mark.usefixtures("keys")
def test_the_executor_and_the_runner_take_a_model_string() -> None:
    """``ToolLoopExecutor("anthropic:...")`` and ``TurnRunner(model=...)`` resolve the string;
    a bad string is a runner configuration error."""
    executor = ToolLoopExecutor("anthropic:claude-sonnet-4-5")
    assert isinstance(executor.model, AnthropicModel)
    TurnRunner(model="openai:gpt-4.1-mini")
    with pytest.raises(InvalidRunnerConfigError, match="model"):
        TurnRunner(model="nonsense")

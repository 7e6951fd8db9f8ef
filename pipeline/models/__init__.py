"""The model seam: `ChatModel`, its request and response values, and tool-definition renderers.

The renderers turn tool descriptions (`ToolDescription`) into each provider's tool-definition
shape.

An executor (the standard one is `pipeline.ToolLoopExecutor`) is the only place a model is
called. See ``docs/architecture.md``. The provider models (`AnthropicModel`, `OpenAIChatModel`,
`OpenAIResponsesModel`) load when first named, not on ``import pipeline`` (docs/architecture.md,
"Import time").
"""

import types as _types
import typing as _typing

from .._history import HistoryView as HistoryView
from ._infer import infer_model as infer_model
from ._message import Message as Message
from ._seam import ChatModel as ChatModel
from ._seam import ModelRequest as ModelRequest
from ._seam import ModelResponse as ModelResponse
from ._seam import ProposedToolCall as ProposedToolCall
from ._seam import Usage as Usage
from ._tool_defs import ToolDescription as ToolDescription
from ._tool_defs import to_anthropic_tools as to_anthropic_tools
from ._tool_defs import to_gemini_tools as to_gemini_tools
from ._tool_defs import to_openai_tools as to_openai_tools

if _typing.TYPE_CHECKING:
    from ._anthropic import AnthropicModel as AnthropicModel
    from ._openai_chat import OpenAIChatModel as OpenAIChatModel
    from ._openai_responses import OpenAIResponsesModel as OpenAIResponsesModel

_LAZY = frozenset({"AnthropicModel", "OpenAIChatModel", "OpenAIResponsesModel"})
"""The provider models: exported here, loaded on first use."""


def __getattr__(name: str) -> _typing.Any:
    """Load a provider model's module when its name is first asked for."""
    module: _types.ModuleType
    if name == "AnthropicModel":
        from . import _anthropic

        module = _anthropic
    elif name == "OpenAIChatModel":
        from . import _openai_chat

        module = _openai_chat
    elif name == "OpenAIResponsesModel":
        from . import _openai_responses

        module = _openai_responses
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the provider models included before they load."""
    return sorted({*globals(), *_LAZY})


__all__ = [
    "AnthropicModel",
    "ChatModel",
    "HistoryView",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "ProposedToolCall",
    "ToolDescription",
    "Usage",
    "infer_model",
    "to_anthropic_tools",
    "to_gemini_tools",
    "to_openai_tools",
]

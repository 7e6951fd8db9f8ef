"""The model seam: `ChatModel`, its request and response values, and tool-definition renderers.

The renderers turn tool descriptions (`ToolDescription`) into each provider's tool-definition
shape.

An executor (the standard one is `pipeline.ToolLoopExecutor`) is the only place a model is
called. See ``docs/architecture.md``. The provider models (`AnthropicModel`, `OpenAIChatModel`,
`OpenAIResponsesModel`) load when first named, not on ``import pipeline`` (docs/architecture.md,
"Import time").
"""

import typing as _typing

from .._history import HistoryView as HistoryView
from .._lazy import lazy_exports as _lazy_exports
from ._infer import infer_model as infer_model
from ._message import Message as Message
from ._provider_state import ProviderState as ProviderState
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

__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "AnthropicModel": "_anthropic",
        "OpenAIChatModel": "_openai_chat",
        "OpenAIResponsesModel": "_openai_responses",
    },
    globals(),
)
"""The provider models: exported here, loaded on first use."""


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
    "ProviderState",
    "ToolDescription",
    "Usage",
    "infer_model",
    "to_anthropic_tools",
    "to_gemini_tools",
    "to_openai_tools",
]

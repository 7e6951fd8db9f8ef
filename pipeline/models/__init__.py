"""The model seam: `ChatModel`, its request and response values, and tool-definition renderers.

The renderers turn tool descriptions into each provider's tool-definition shape.

An executor (the standard one is `pipeline.ToolLoopExecutor`) is the only place a model is
called. See ``docs/architecture.md``.
"""

from .._history import HistoryView as HistoryView
from ._anthropic import AnthropicModel as AnthropicModel
from ._infer import infer_model as infer_model
from ._openai_chat import OpenAIChatModel as OpenAIChatModel
from ._openai_responses import OpenAIResponsesModel as OpenAIResponsesModel
from ._seam import ChatModel as ChatModel
from ._seam import Message as Message
from ._seam import ModelRequest as ModelRequest
from ._seam import ModelResponse as ModelResponse
from ._seam import ProposedToolCall as ProposedToolCall
from ._seam import Usage as Usage
from ._tool_defs import to_anthropic_tools as to_anthropic_tools
from ._tool_defs import to_gemini_tools as to_gemini_tools
from ._tool_defs import to_openai_tools as to_openai_tools

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
    "Usage",
    "infer_model",
    "to_anthropic_tools",
    "to_gemini_tools",
    "to_openai_tools",
]

"""What tools return and how the model reads it: spooled artifacts, media and trust envelopes.

Text and bytes results are spooled and wrapped in a `SpooledArtifact` (or a subclass a tool
names); the model queries large ones through forged `ArtifactTool` s. `Media` carries images,
audio, video and documents with a trust tier, and `render_tool_result` wraps whatever the model
reads in a trust envelope; `estimate_tokens` counts (or estimates) the tokens of text. See
``docs/architecture.md`` for where this wing sits in the turn. The JSON and Markdown artifact
classes and the token estimate load when first named (docs/architecture.md, "Import time").
"""

import typing as _typing

from .._lazy import lazy_exports as _lazy_exports
from ._artifact import SpooledArtifact as SpooledArtifact
from ._envelope import RenderedResult as RenderedResult
from ._envelope import ToolLookup as ToolLookup
from ._envelope import render_tool_result as render_tool_result
from ._forge import ArtifactTool as ArtifactTool
from ._media import Media as Media
from ._media import MediaKind as MediaKind
from ._media import ModalityHazard as ModalityHazard
from ._media import TrustTier as TrustTier
from ._toolmethod import ToolMethod as ToolMethod

if _typing.TYPE_CHECKING:
    from ._json_artifact import JsonFormat as JsonFormat
    from ._json_artifact import SpooledJsonArtifact as SpooledJsonArtifact
    from ._md_artifact import SpooledMarkdownArtifact as SpooledMarkdownArtifact
    from ._tokens import EncodingName as EncodingName
    from ._tokens import estimate_tokens as estimate_tokens

__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "JsonFormat": "_json_artifact",
        "SpooledJsonArtifact": "_json_artifact",
        "SpooledMarkdownArtifact": "_md_artifact",
        "EncodingName": "_tokens",
        "estimate_tokens": "_tokens",
    },
    globals(),
)
"""The JSON and Markdown artifact names and the token estimate: exported here, loaded on first
use."""


__all__ = [
    "ArtifactTool",
    "EncodingName",
    "JsonFormat",
    "Media",
    "MediaKind",
    "ModalityHazard",
    "RenderedResult",
    "SpooledArtifact",
    "SpooledJsonArtifact",
    "SpooledMarkdownArtifact",
    "ToolLookup",
    "ToolMethod",
    "TrustTier",
    "estimate_tokens",
    "render_tool_result",
]

"""What tools return and how the model reads it: spooled artifacts, media and trust envelopes.

Text and bytes results are spooled and wrapped in a `SpooledArtifact` (or a subclass a tool
names); the model queries large ones through forged `ArtifactTool` s. `Media` carries images,
audio, video and documents with a trust tier, and `render_tool_result` wraps whatever the model
reads in a trust envelope. See ``docs/architecture.md`` for where this wing sits in the turn.
"""

from ._artifact import SpooledArtifact as SpooledArtifact
from ._envelope import RenderedResult as RenderedResult
from ._envelope import render_tool_result as render_tool_result
from ._forge import ArtifactTool as ArtifactTool
from ._json_artifact import JsonFormat as JsonFormat
from ._json_artifact import SpooledJsonArtifact as SpooledJsonArtifact
from ._md_artifact import SpooledMarkdownArtifact as SpooledMarkdownArtifact
from ._media import Media as Media
from ._media import MediaKind as MediaKind
from ._media import ModalityHazard as ModalityHazard
from ._media import TrustTier as TrustTier
from ._toolmethod import ToolMethod as ToolMethod

__all__ = [
    "ArtifactTool",
    "JsonFormat",
    "Media",
    "MediaKind",
    "ModalityHazard",
    "RenderedResult",
    "SpooledArtifact",
    "SpooledJsonArtifact",
    "SpooledMarkdownArtifact",
    "ToolMethod",
    "TrustTier",
    "render_tool_result",
]

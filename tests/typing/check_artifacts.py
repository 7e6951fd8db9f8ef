"""Type checks for the artifact classes (checked by mypy, never collected by pytest)."""

from __future__ import annotations

from pipeline.artifacts import SpooledArtifact, SpooledJsonArtifact, SpooledMarkdownArtifact
from pipeline.artifacts._capped import LineQueries
from pipeline.artifacts._json_tools import JsonQueries
from pipeline.artifacts._md_tools import MarkdownQueries


def renderers_read_the_classes(
    plain: SpooledArtifact, json: SpooledJsonArtifact, markdown: SpooledMarkdownArtifact
) -> None:
    # The query tools' renderers read artifacts through protocols (so they do not import the
    # classes that name them as tool methods); each class must satisfy its protocol.
    lines: list[LineQueries] = [plain, json, markdown]
    records: JsonQueries = json
    blocks: MarkdownQueries = markdown
    del lines, records, blocks

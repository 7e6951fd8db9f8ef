"""Media: validation naming the bad field, factories filling trust tier and hazard."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pipeline.artifacts import Media
from pipeline.errors import InvalidMediaError

PNG = b"\x89PNG\r\n\x1a\nfake"
GOOD: dict[str, Any] = {
    "kind": "image", "mime_type": "image/png", "filename": "chart.png", "data": PNG,
    "trust_tier": "first-party", "modality_hazard": "opaque-perceptual",
}

FACTORIES = [
    ("tool_generated", "first-party"),
    ("user_attachment", "third-party-private"),  # the seeds' tier: an attachment is not ours
    ("retrieved_public", "third-party-public"),
    ("retrieved_private", "third-party-private"),
]
KINDS = [
    ("image", "image/png", "opaque-perceptual"),
    ("audio", "audio/mpeg", "opaque-perceptual"),
    ("video", "video/mp4", "opaque-perceptual"),
    ("document", "application/pdf", "extractable-instructions"),
    ("document", "text/markdown; charset=utf-8", "extractable-instructions"),
]


@pytest.mark.parametrize(("factory", "tier"), FACTORIES, ids=[f for f, _ in FACTORIES])
@pytest.mark.parametrize(("kind", "mime", "hazard"), KINDS,
                         ids=["image", "audio", "video", "pdf", "markdown"])
def test_factories_fill_tier_and_hazard(
    factory: str, tier: str, kind: str, mime: str, hazard: str
) -> None:
    """Each factory sets its trust tier; documents are extractable, other kinds perceptual."""
    media = getattr(Media, factory)(kind, mime, "file.bin", b"data", source="https://s.test/f")
    assert media.trust_tier == tier
    assert media.modality_hazard == hazard
    assert media.trusted is (tier == "first-party")
    assert media.source == "https://s.test/f"
    assert media.read_bytes() == b"data"
    assert media.size == 4


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"kind": "hologram"}, "kind"),
        ({"kind": None}, "kind"),
        ({"mime_type": ""}, "mime_type"),
        ({"mime_type": "png"}, "mime_type"),
        ({"mime_type": "image/"}, "mime_type"),
        ({"mime_type": "image/png; bad"}, "mime_type"),
        ({"mime_type": 5}, "mime_type"),
        ({"mime_type": "audio/mpeg"}, "mime_type"),
        ({"mime_type": "application/pdf"}, "mime_type"),
        ({"kind": "document", "mime_type": "image/png"}, "mime_type"),
        ({"filename": ""}, "filename"),
        ({"filename": "a\nb.png"}, "filename"),
        ({"filename": "x" * 256}, "filename"),
        ({"filename": None}, "filename"),
        ({"trust_tier": "trusted"}, "trust_tier"),
        ({"modality_hazard": "safe"}, "modality_hazard"),
        ({"data": None}, "data"),
        ({"reader": lambda: PNG}, "data"),
        ({"data": b""}, "data"),
        ({"data": "text"}, "data"),
        ({"data": None, "reader": b"not callable"}, "reader"),
        ({"source": ""}, "source"),
        ({"id": ""}, "id"),
    ],
    ids=["bad-kind", "none-kind", "empty-mime", "no-slash", "no-subtype", "bad-param",
         "non-str-mime", "audio-mime-for-image", "app-mime-for-image", "image-mime-for-doc",
         "empty-filename", "control-filename", "long-filename", "none-filename", "bad-tier",
         "bad-hazard", "neither", "both", "empty-data", "str-data", "uncallable-reader",
         "empty-source", "empty-id"],
)
def test_bad_fields_raise_invalid_media_naming_the_field(change: dict[str, Any],
                                                         field: str) -> None:
    """Every bad field raises InvalidMediaError whose message and .field name it."""
    with pytest.raises(InvalidMediaError) as info:
        Media(**{**GOOD, **change})
    assert info.value.code == "E_INVALID_INITIAL_MEDIA_VALUE"
    assert info.value.field == field
    assert field in info.value.message


@pytest.mark.parametrize("field", ["trust_tier", "modality_hazard"])
def test_unhashable_tier_or_hazard_is_an_invalid_media_error(field: str) -> None:
    """A list (unhashable) as trust tier or hazard raises InvalidMediaError, not TypeError."""
    with pytest.raises(InvalidMediaError) as info:
        Media(**{**GOOD, field: ["first-party"]})
    assert info.value.field == field


def test_reader_backed_media_reads_lazily() -> None:
    """A reader is only called by read_bytes; the size stays unknown until then."""
    calls: list[int] = []

    def read() -> bytes:
        calls.append(1)
        return PNG

    media = Media.retrieved_public("image", "image/png", "remote.png", read)
    assert media.reader is read
    assert media.data is None
    assert media.size is None
    assert calls == []
    assert media.read_bytes() == PNG
    assert calls == [1]


def test_reader_returning_non_bytes_is_an_invalid_media_error() -> None:
    """A reader that returns something other than bytes fails at read time with a typed error."""
    media = Media.user_attachment("document", "text/plain", "notes.txt", lambda: "text")  # type: ignore[arg-type, return-value]
    with pytest.raises(InvalidMediaError, match="reader returned str"):
        media.read_bytes()


def test_media_is_frozen_with_unique_generated_ids() -> None:
    """Media cannot be changed after construction and each gets its own id."""
    first = Media(**GOOD)
    second = Media(**GOOD)
    assert first.id != second.id
    assert len(first.id) == 32
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.kind = "audio"  # type: ignore[misc]


def test_repr_hides_the_content() -> None:
    """The repr shows the size, never the bytes."""
    text = repr(Media(**GOOD, id="m1"))
    assert "12 bytes" in text
    assert "PNG" not in text
    assert text.startswith("Media(kind='image'")
    assert type(Media(**GOOD)).__module__ == "pipeline.artifacts"


def test_explicit_inert_hazard_is_allowed() -> None:
    """The inert hazard can be set explicitly (the factories never choose it)."""
    media = Media(**{**GOOD, "modality_hazard": "inert"})
    assert media.modality_hazard == "inert"


def test_field_literals_are_public_for_annotations() -> None:
    """MediaKind, TrustTier and ModalityHazard are exported and list the accepted values."""
    from typing import get_args

    from pipeline.artifacts import MediaKind, ModalityHazard, TrustTier

    assert get_args(MediaKind) == ("image", "audio", "video", "document")
    assert get_args(TrustTier) == ("first-party", "third-party-public", "third-party-private")
    assert get_args(ModalityHazard) == ("inert", "extractable-instructions", "opaque-perceptual")

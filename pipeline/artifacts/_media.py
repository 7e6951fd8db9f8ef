"""`Media`: an image, audio, video or document result, with its trust tier and modality hazard.

Trust tiers say who vouches for the content:

- ``first-party``: made by this system (`Media.tool_generated`); rendered as trusted content;
- ``third-party-public`` / ``third-party-private``: from elsewhere, public (web pages, public
  files: `Media.retrieved_public`) or private (mailboxes, shared drives:
  `Media.retrieved_private`, and a user's attachments: `Media.user_attachment`, as the seeds
  say); always rendered as untrusted content, whatever tool returned it.

Modality hazards say how instructions could hide in it: ``extractable-instructions`` (documents:
text a model reads as text), ``opaque-perceptual`` (images, audio, video: instructions only a
perceiving model picks up) and ``inert``. The factories set documents to
``extractable-instructions`` and every other kind to ``opaque-perceptual``; ``inert`` is only set
explicitly.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NoReturn, Self, get_args

from ..errors import InvalidMediaError

__all__ = ["Media", "MediaKind", "ModalityHazard", "TrustTier"]

MediaKind = Literal["image", "audio", "video", "document"]
TrustTier = Literal["first-party", "third-party-public", "third-party-private"]
ModalityHazard = Literal["inert", "extractable-instructions", "opaque-perceptual"]

_KINDS: frozenset[str] = frozenset(get_args(MediaKind))
_TIERS: frozenset[str] = frozenset(get_args(TrustTier))
_HAZARDS: frozenset[str] = frozenset(get_args(ModalityHazard))
# The top-level MIME types each kind may use.
_MIME_TOPS: dict[str, tuple[str, ...]] = {
    "image": ("image",),
    "audio": ("audio",),
    "video": ("video",),
    "document": ("application", "text"),
}
_TOKEN = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_MIME = re.compile(rf"({_TOKEN})/({_TOKEN})")
_PARAM = re.compile(r'\s*[A-Za-z0-9!#$&^_.+-]+=(?:"[^"\\\r\n]*"|[A-Za-z0-9!#$&^_.+-]+)\s*')
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _new_id() -> str:
    import uuid  # on first use: it imports platform (docs/architecture.md, "Import time")

    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class Media:
    """A non-text tool result or attachment, kept with where it came from.

    Exactly one of ``data`` and ``reader`` is given. Build it with keywords, or with one of the
    factories that fill ``trust_tier`` and ``modality_hazard``.

    Raises:
        InvalidMediaError: a field is bad; the message and ``field`` attribute name it.
    """

    kind: MediaKind
    """What the content is: ``image``, ``audio``, ``video`` or ``document``."""

    mime_type: str
    """``type/subtype`` (optionally with ``; name=value`` parameters) matching ``kind``: images
    ``image/*``, audio ``audio/*``, video ``video/*``, documents ``application/*`` or ``text/*``."""

    filename: str
    """A display name without control characters (1 to 255 characters)."""

    trust_tier: TrustTier
    """Who vouches for the content; only ``first-party`` renders as trusted."""

    modality_hazard: ModalityHazard
    """How instructions could hide in the content."""

    data: bytes | None = None
    """The content, when held in memory (non-empty)."""

    reader: Callable[[], bytes] | None = None
    """A zero-argument callable returning the content (e.g. ``Path(p).read_bytes``), instead of
    ``data``."""

    source: str | None = None
    """Where the content came from (a URL, a path, a mailbox id, ...), when known."""

    id: str = field(default_factory=_new_id)
    """A unique id (generated)."""

    def __post_init__(self) -> None:
        """Validate every field."""
        # Fields are typed, but values come from users at run time: check them as objects.
        kind: object = self.kind
        if not isinstance(kind, str) or kind not in _KINDS:
            _bad("kind", f"kind must be one of {sorted(_KINDS)}, got {kind!r}")
        _check_mime(kind, self.mime_type)
        name: object = self.filename
        if not isinstance(name, str) or not name or len(name) > 255 or _CONTROL.search(name):
            _bad(
                "filename",
                f"filename must be 1 to 255 characters without control characters, got {name!r}",
            )
        tier: object = self.trust_tier
        if not isinstance(tier, str) or tier not in _TIERS:
            _bad("trust_tier", f"trust_tier must be one of {sorted(_TIERS)}, got {tier!r}")
        hazard: object = self.modality_hazard
        if not isinstance(hazard, str) or hazard not in _HAZARDS:
            _bad(
                "modality_hazard",
                f"modality_hazard must be one of {sorted(_HAZARDS)}, got {self.modality_hazard!r}",
            )
        data: object = self.data
        reader: object = self.reader
        if (data is None) == (reader is None):
            _bad(
                "data",
                "give exactly one of data and reader"
                + (", not neither" if data is None else ", not both"),
            )
        if data is not None and (not isinstance(data, bytes) or not data):
            _bad(
                "data",
                f"data must be non-empty bytes, got {type(data).__name__}"
                + (" of length 0" if isinstance(data, bytes) else ""),
            )
        if reader is not None and not callable(reader):
            _bad(
                "reader",
                "reader must be a zero-argument callable returning bytes, got "
                f"{type(reader).__name__}",
            )
        source: object = self.source
        if source is not None and (not isinstance(source, str) or not source):
            _bad("source", f"source must be a non-empty string or None, got {source!r}")
        media_id: object = self.id
        if not isinstance(media_id, str) or not media_id:
            _bad("id", f"id must be a non-empty string, got {media_id!r}")

    @property
    def trusted(self) -> bool:
        """True for first-party content, the only tier rendered as trusted."""
        return self.trust_tier == "first-party"

    @property
    def size(self) -> int | None:
        """The length of ``data`` in bytes, or None for a reader-backed media (never read here)."""
        return None if self.data is None else len(self.data)

    def read_bytes(self) -> bytes:
        """Return the content: ``data``, or what ``reader()`` returns.

        Raises:
            InvalidMediaError: the reader returned something other than bytes.
        """
        if self.data is not None:
            return self.data
        assert self.reader is not None  # guaranteed by __post_init__
        content = self.reader()
        if not isinstance(content, bytes):
            _bad("reader", f"reader returned {type(content).__name__}, not bytes")
        return content

    @classmethod
    def _make(
        cls,
        tier: TrustTier,
        kind: MediaKind,
        mime_type: str,
        filename: str,
        data: bytes | Callable[[], bytes],
        source: str | None,
    ) -> Self:
        hazard: ModalityHazard = (
            "extractable-instructions" if kind == "document" else "opaque-perceptual"
        )
        if callable(data):
            return cls(
                kind=kind,
                mime_type=mime_type,
                filename=filename,
                reader=data,
                trust_tier=tier,
                modality_hazard=hazard,
                source=source,
            )
        return cls(
            kind=kind,
            mime_type=mime_type,
            filename=filename,
            data=data,
            trust_tier=tier,
            modality_hazard=hazard,
            source=source,
        )

    @classmethod
    def tool_generated(
        cls,
        kind: MediaKind,
        mime_type: str,
        filename: str,
        data: bytes | Callable[[], bytes],
        *,
        source: str | None = None,
    ) -> Self:
        """Build first-party media made by a tool of this system (a chart, a render, ...).

        Use `retrieved_public` or `retrieved_private` instead when the tool only fetched it.
        ``data`` may be the bytes or a reader callable.
        """
        return cls._make("first-party", kind, mime_type, filename, data, source)

    @classmethod
    def user_attachment(
        cls,
        kind: MediaKind,
        mime_type: str,
        filename: str,
        data: bytes | Callable[[], bytes],
        *,
        source: str | None = None,
    ) -> Self:
        """Build third-party private media: a file the user attached.

        A user's attachment is not first-party content (the user did not write everything in
        it, and it may hold instructions), so it gets ``third-party-private``, as the seeds say:
        treating it as first-party would launder its trust.
        """
        return cls._make("third-party-private", kind, mime_type, filename, data, source)

    @classmethod
    def retrieved_public(
        cls,
        kind: MediaKind,
        mime_type: str,
        filename: str,
        data: bytes | Callable[[], bytes],
        *,
        source: str | None = None,
    ) -> Self:
        """Build third-party public media (fetched from the web or another public place)."""
        return cls._make("third-party-public", kind, mime_type, filename, data, source)

    @classmethod
    def retrieved_private(
        cls,
        kind: MediaKind,
        mime_type: str,
        filename: str,
        data: bytes | Callable[[], bytes],
        *,
        source: str | None = None,
    ) -> Self:
        """Build third-party private media (from a mailbox, a shared drive, a private API)."""
        return cls._make("third-party-private", kind, mime_type, filename, data, source)

    def __repr__(self) -> str:
        """Return the fields without the content."""
        content = f"{len(self.data)} bytes" if self.data is not None else "reader"
        return (
            f"Media(kind={self.kind!r}, mime_type={self.mime_type!r}, "
            f"filename={self.filename!r}, {content}, trust_tier={self.trust_tier!r}, "
            f"modality_hazard={self.modality_hazard!r}, source={self.source!r}, id={self.id!r})"
        )


def _bad(field_name: str, message: str) -> NoReturn:
    raise InvalidMediaError(f"invalid Media {field_name}: {message}", field=field_name)


def _check_mime(kind: str, mime_type: object) -> None:
    if not isinstance(mime_type, str) or not mime_type.strip():
        _bad("mime_type", f"mime_type must be a non-empty string, got {mime_type!r}")
    head, _, params = mime_type.partition(";")
    match = _MIME.fullmatch(head.strip())
    if match is None or (params and not all(_PARAM.fullmatch(p) for p in params.split(";"))):
        _bad("mime_type", f"mime_type {mime_type!r} is not of the form type/subtype")
    top = match.group(1).lower()
    allowed = _MIME_TOPS[kind]
    if top not in allowed:
        wanted = " or ".join(f"{t}/*" for t in allowed)
        _bad("mime_type", f"mime_type {mime_type!r} does not fit kind {kind!r} (wants {wanted})")


Media.__module__ = "pipeline.artifacts"

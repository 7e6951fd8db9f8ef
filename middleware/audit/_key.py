"""`AuditKey`: the secret of a keyed audit chain, and how keyed rows and heads are sealed.

Without a key a row's ``hash`` is the SHA-256 of its canonical text
(``middleware/audit/_chain.py``): anyone can recompute it, so a rewrite that recomputes the
chain verifies. With a key, the row's ``hash`` is ``"hmac-sha256:<key id>:<hex>"``: the
HMAC-SHA256, under the key, of the same canonical text (whose ``prev_hash`` is the previous
row's keyed hash). Nobody without the key can make a row that verifies, and the prefix tells
keyed rows from unkeyed ones, so a verifier with a key never accepts a row made without it.
The key id (8 hex digits of an HMAC of a fixed text under the key) names the key without
revealing it; it is part of every keyed hash and of ``repr(key)``.

A keyed sink also seals its stored head (count and last hash, see `AuditKey.head_seal`): a
tail cut with the head rewritten or deleted is found without a head saved elsewhere. Only
rolling the whole log back to an earlier copy (rows and sealed head) is not: an anchor
(``middleware/audit/_anchor.py``) catches that.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pipeline.errors import InvalidMiddlewareConfigError

from ._chain import GENESIS_HASH

if TYPE_CHECKING:
    from ._chain import AuditHead

__all__ = [
    "KEYED_PREFIX",
    "MIN_KEY_BYTES",
    "AuditKey",
    "AuditKeyError",
    "AuditKeyMismatchError",
    "Digest",
    "check_chain_key",
    "check_key",
    "key_id_of",
    "row_digest",
    "sealed",
]

KEYED_PREFIX = "hmac-sha256:"
"""How a keyed row's hash begins; an unkeyed hash is 64 hex digits."""

MIN_KEY_BYTES = 16
"""The shortest key accepted: 128 bits (``openssl rand -hex 32`` makes 256)."""

_ID_TEXT = b"loopware.audit.key-id"
_HEAD_TEXT = b"loopware.audit.head\x00"

Digest = Callable[[bytes], str]
"""A row's hash from its canonical text: SHA-256 hex, or the keyed form."""


class AuditKeyError(InvalidMiddlewareConfigError):
    """An audit key could not be loaded or is unusable (missing, not hex, too short).

    The message never contains the key or the text it was read from.
    """

    code = "E_AUDIT_KEY"
    default_message = "the audit key is invalid"


class AuditKeyMismatchError(InvalidMiddlewareConfigError):
    """A sink was opened on a log chained under another key, or in the other mode.

    Raised when the sink opens (before it writes anything): appending would mix rows that one
    verifier cannot check together. Keep the old log as it is and start a new file or chain.
    Against a log that was keyed, it is also what a rewrite by someone without the key looks
    like: its head is then unkeyed.

    Attributes:
        expected: The sink's key id (None: the sink has no key).
        found: The key id the log's head was made with (None: made without a key).
    """

    code = "E_AUDIT_KEY_MISMATCH"
    default_message = "the audit log was chained under another key"
    expected: str | None
    found: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        expected: str | None,
        found: str | None,
        **context: Any,
    ) -> None:
        """Build the error; ``expected`` and ``found`` are key ids (None: no key)."""
        super().__init__(message, expected=expected, found=found, **context)


class AuditKey:
    """The secret key of a keyed audit chain (HMAC-SHA256), held by the writer and verifier.

    Args:
        secret: The key's bytes, at least 16 (`MIN_KEY_BYTES`).

    Raises:
        AuditKeyError: ``secret`` is not bytes or is too short.

    ``repr()`` shows the key id, never the secret. Load a key with `from_env` or `from_file`
    (hex text, e.g. made by ``openssl rand -hex 32``).
    """

    __slots__ = ("_id", "_prefix", "_secret")

    def __init__(self, secret: bytes) -> None:
        """Check and keep ``secret``; see the class docstring."""
        given: object = secret  # checked at run time
        if not isinstance(given, bytes):
            raise AuditKeyError(
                f"an audit key must be bytes, not {type(given).__name__}", option="key"
            )
        if len(secret) < MIN_KEY_BYTES:
            raise AuditKeyError(
                f"an audit key must be at least {MIN_KEY_BYTES} bytes, got {len(secret)}",
                option="key",
            )
        self._secret = secret
        self._id = hmac.new(secret, _ID_TEXT, hashlib.sha256).hexdigest()[:8]
        self._prefix = f"{KEYED_PREFIX}{self._id}:"

    @classmethod
    def from_hex(cls, text: str, *, source: str = "the text") -> AuditKey:
        """The key whose bytes ``text`` spells in hex (surrounding whitespace ignored).

        Args:
            text: The hex digits.
            source: Where the text came from, for the error message.

        Raises:
            AuditKeyError: ``text`` is not hex, or spells too short a key.
        """
        try:
            secret = bytes.fromhex(text.strip())
        except ValueError:
            raise AuditKeyError(
                f"{source} does not hold an audit key in hex (make one with "
                "`openssl rand -hex 32`)",
                option="key",
            ) from None
        if len(secret) < MIN_KEY_BYTES:
            raise AuditKeyError(
                f"{source} holds {len(secret)} key bytes; an audit key needs at least "
                f"{MIN_KEY_BYTES} ({2 * MIN_KEY_BYTES} hex digits)",
                option="key",
            )
        return cls(secret)

    @classmethod
    def from_env(cls, name: str = "LOOPWARE_AUDIT_KEY") -> AuditKey:
        """The key in the environment variable ``name``, as hex.

        Raises:
            AuditKeyError: the variable is unset or empty, or not a hex key.
        """
        text = os.environ.get(name, "")
        if not text.strip():
            raise AuditKeyError(f"the environment variable {name} is not set", option="key")
        return cls.from_hex(text, source=f"the environment variable {name}")

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> AuditKey:
        """The key in the file ``path``, as hex text (``openssl rand -hex 32 > audit.key``).

        Raises:
            AuditKeyError: the file cannot be read, or does not hold a hex key.
        """
        name = os.fspath(path)
        try:
            with open(name, "rb") as f:
                data = f.read(64 * 1024)
        except OSError as exc:
            raise AuditKeyError(
                f"cannot read the audit key file {name!r}: {exc.strerror}", option="key"
            ) from exc
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            text = "?"  # not hex: reported below, without the content
        return cls.from_hex(text, source=f"the audit key file {name!r}")

    @property
    def id(self) -> str:
        """The key's id: 8 hex digits that name it (in every keyed hash) and reveal nothing."""
        return self._id

    def __repr__(self) -> str:
        """Show the key id, never the secret."""
        return f"AuditKey(id={self._id!r})"

    def __eq__(self, other: object) -> bool:
        """Keys are equal when their secrets are (compared in constant time)."""
        if not isinstance(other, AuditKey):
            return NotImplemented
        return hmac.compare_digest(self._secret, other._secret)

    def __hash__(self) -> int:
        """Hash by the key id."""
        return hash(self._id)

    def row_hash(self, text: bytes) -> str:
        """A keyed row's hash: ``"hmac-sha256:<id>:"`` and the hex HMAC of its canonical text."""
        return self._prefix + hmac.digest(self._secret, text, "sha256").hex()

    def head_seal(self, head: AuditHead) -> str:
        """The seal of a stored head: the hex HMAC of its count and hash (not a row's text)."""
        text = b"%s%d:%s" % (_HEAD_TEXT, head.count, head.hash.encode("utf-8", "surrogatepass"))
        return hmac.digest(self._secret, text, "sha256").hex()


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def row_digest(key: AuditKey | None) -> Digest:
    """The function from a row's canonical text to its hash: SHA-256 hex, or keyed."""
    return _sha256_hex if key is None else key.row_hash


def key_id_of(row_hash: str) -> str | None:
    """The key id a row's hash was made with; None for an unkeyed hash."""
    if not row_hash.startswith(KEYED_PREFIX):
        return None
    return row_hash[len(KEYED_PREFIX) :].split(":", 1)[0]


def sealed(key: AuditKey, head: AuditHead | None, seal: str | None) -> bool:
    """Whether ``seal`` is ``head``'s seal under ``key`` (False when either is missing)."""
    if head is None or seal is None:
        return False
    return hmac.compare_digest(key.head_seal(head), seal)


def check_key(owner: str, key: object) -> AuditKey | None:
    """Return ``key`` when it is None or an `AuditKey`.

    Raises:
        AuditKeyError: it is anything else (bytes are wrapped by ``AuditKey(secret)``).
    """
    if key is not None and not isinstance(key, AuditKey):
        raise AuditKeyError(
            f"{owner}: key must be an AuditKey (AuditKey(secret), AuditKey.from_env(name) or "
            f"AuditKey.from_file(path)), not {type(key).__name__}",
            option="key",
        )
    return key


def check_chain_key(owner: str, key: AuditKey | None, head: AuditHead) -> None:
    """Refuse to open a log whose head was chained in the other mode or under another key.

    A head without a row's hash (an empty chain, or one whose rows were all deleted) takes
    either.

    Raises:
        AuditKeyMismatchError: the head's hash was made without ``key``.
    """
    if head.count == 0 or head.hash == GENESIS_HASH:
        return
    found = key_id_of(head.hash)
    expected = None if key is None else key.id
    if found == expected:
        return
    if expected is None:
        message = (
            f"{owner}: the log is keyed (key id {found}); open it with that key "
            "(key=AuditKey...)"
        )
    elif found is None:
        message = (
            f"{owner}: the log's chain is not keyed, but key id {expected} was given: it was "
            "written without a key, or rewritten by someone without it (start a keyed log in "
            "a new file or chain; keep this one as it is)"
        )
    else:
        message = (
            f"{owner}: the log is keyed with key id {found}, not {expected}: open it with that "
            "key, or start a new log for this one"
        )
    raise AuditKeyMismatchError(message, expected=expected, found=found, option="key")


for _cls in (AuditKey, AuditKeyError, AuditKeyMismatchError):
    _cls.__module__ = "middleware.audit"

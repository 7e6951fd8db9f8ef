"""`ProviderState`: what a provider asked to get back with an assistant message, kept with it.

Some providers hand out state the next request must carry: Anthropic's thinking blocks (with
their signatures) before the calls of an answer that thought, the Responses API's reasoning
items (``encrypted_content`` when nothing is stored at OpenAI) and an output message's
``phase``. A provider model puts that state on its `ModelResponse`; the executor stores it on
the assistant `Message`, and the stores keep it (as JSON text) with the message, so a new model
instance, another process or a durable turn re-run after a crash sends it back exactly as the
provider gave it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ProviderState"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderState:
    """Provider items an assistant message must be sent back with (opaque to loopware).

    Example (an Anthropic answer that thought before calling a tool)::

        ProviderState(provider="anthropic", items=({"type": "thinking", "thinking": "...",
                      "signature": "EqQBCgIYAh..."},))
    """

    provider: str
    """Whose state it is (``"anthropic"``, ``"openai-responses"``): a model sends back only its
    own provider's state."""
    items: tuple[Mapping[str, Any], ...] = ()
    """The provider's items, as JSON objects exactly as it sent them, in order: Anthropic's
    thinking and redacted-thinking blocks, the Responses API's reasoning items. Never change
    them in place."""
    phase: str | None = None
    """The Responses API's ``phase`` of the assistant's message (``"commentary"`` for text said
    along with calls, ``"final_answer"``), None when the provider gave none."""

    def __hash__(self) -> int:
        """Hash by the JSON text (the items are dicts), so a `Message` holding it hashes too."""
        return hash(self.to_json())

    def to_json(self) -> str:
        """The state as one JSON text (what the stores keep)."""
        data: dict[str, Any] = {"provider": self.provider, "items": [dict(i) for i in self.items]}
        if self.phase is not None:
            data["phase"] = self.phase
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ProviderState:
        """The state `to_json` wrote.

        Raises:
            ValueError: the text is not such a state.
        """
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("provider"), str):
            raise ValueError("not a provider state")
        items = data.get("items") or []
        phase = data.get("phase")
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise ValueError("a provider state's items must be JSON objects")
        return cls(
            provider=data["provider"],
            items=tuple(items),
            phase=phase if isinstance(phase, str) else None,
        )


ProviderState.__module__ = "pipeline.models"

"""The gateway's caps as middleware: store-backed, windowed `ToolCallLimit`s keyed by principal.

Each `CapConfig` (``loopware_cli/_gateway_config_caps.py``) becomes one `ToolCallLimit` with
``scope`` a key derived from the turn, never from what the client says: the principal (the
part of the turn's conversation id before ``#``, which the gateway sets) or one key for the
whole gateway, and a rolling ``window``. Its slots are reserved in the gateway's store (a
``CounterStore``) in the ``tool_call`` stage, before the call is forwarded; a call over a cap
is refused with the count in the words the client reads (``E_CALL_DENIED ... 10 of 10
'git_log' runs for this principal in the last 1 minute are used up``) and in the audit row's
decisions (a ``LimitReading``). The tool a cap hid is shown again at the next turn: the
session rolls over after a cap's decision (`CAP_PREFIX`), since a window frees slots as it
rolls and a hide would otherwise outlast it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from middleware import ToolCallLimit
from pipeline import TurnContext

from ._gateway_config_caps import CapConfig
from ._gateway_store import principal_part

__all__ = ["CAP_PREFIX", "GATEWAY_KEY", "cap_limits", "principal_key"]

CAP_PREFIX: Final = "loopware.gateway.cap."
"""The start of every cap's policy name."""
GATEWAY_KEY: Final = "gateway"
"""The one key of the gateway-wide caps."""


def principal_key(ctx: TurnContext) -> str:
    """The principal a turn serves (the scope of a per-principal cap)."""
    return principal_part(ctx.conversation_id or "")


def gateway_key(ctx: TurnContext) -> str:
    """One key for every turn (the scope of a gateway-wide cap)."""
    return GATEWAY_KEY


def cap_limits(caps: Sequence[CapConfig], clock: Callable[[], float]) -> list[ToolCallLimit]:
    """One store-backed `ToolCallLimit` per cap, reading windows on ``clock``."""
    return [
        ToolCallLimit(
            cap.per_tool,
            total=cap.total,
            on_exceed="hide",
            namespace=cap.namespace,
            scope=principal_key if cap.scope == "principal" else gateway_key,
            window=cap.window,
            clock=clock,
            scope_name=cap.scope if cap.scope == "principal" else "gateway",
        )
        for cap in caps
    ]

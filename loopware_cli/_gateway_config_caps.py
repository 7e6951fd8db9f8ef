"""The ``[caps]`` table of the gateway configuration: calls per time window, gateway-wide.

::

    [caps.principal]             # each principal on its own
    per_minute = { total = 60, git_git_log = 10 }   # all tools, and one tool
    per_hour = { total = 1000 }

    [caps.gateway]               # every principal together
    per_minute = { total = 600 }
    per_day = { git_git_log = 20000 }

Each window of each table is one store-backed `ToolCallLimit` (``scope`` the principal, or one
key for the whole gateway; ``window`` the minute, hour or day, rolling): its slots are reserved
in the gateway's store before the call is forwarded, so a cap holds across a principal's
sessions, turns and concurrent calls. A bad table raises `GatewayConfigError` naming the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from ._gateway_config_errors import bad, count, table

__all__ = ["CapConfig", "CapScope", "parse_caps"]

CapScope = Literal["principal", "gateway"]
"""Who a cap counts: each principal on its own, or every principal together."""

_WINDOWS = {
    "per_minute": timedelta(minutes=1),
    "per_hour": timedelta(hours=1),
    "per_day": timedelta(days=1),
}
_TOOL = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True)
class CapConfig:
    """One cap: who it counts, over which rolling window, per tool and in total."""

    scope: CapScope
    """``"principal"`` or ``"gateway"``."""
    window_name: str
    """``"per_minute"``, ``"per_hour"`` or ``"per_day"``."""
    window: timedelta
    """The rolling window."""
    per_tool: dict[str, int]
    """Tool name to the most calls in the window."""
    total: int | None
    """The most calls of all tools in the window, if capped."""

    @property
    def namespace(self) -> str:
        """The cap's policy name in refusals and the audit (``loopware.gateway.cap...``)."""
        return f"loopware.gateway.cap.{self.scope}.{self.window_name}"


def parse_caps(raw: object) -> tuple[CapConfig, ...]:
    """The ``[caps]`` table, checked: one `CapConfig` per scope and window given.

    Raises:
        GatewayConfigError: an unknown key, a tool name that is not one, a cap below 1.
    """
    caps = table("caps", raw)
    if unknown := sorted(set(caps) - {"principal", "gateway"}):
        raise bad("caps", f"unknown keys {unknown}")
    found: list[CapConfig] = []
    scope: CapScope
    for scope in ("principal", "gateway"):
        if scope not in caps:
            continue
        windows = table(f"caps.{scope}", caps[scope])
        if unknown := sorted(set(windows) - set(_WINDOWS)):
            raise bad(f"caps.{scope}", f"unknown keys {unknown} (per_minute, per_hour, per_day)")
        for name, window in _WINDOWS.items():
            if name not in windows:
                continue
            key = f"caps.{scope}.{name}"
            limits = table(key, windows[name])
            per_tool: dict[str, int] = {}
            for tool, value in limits.items():
                if tool != "total" and _TOOL.fullmatch(tool) is None:
                    raise bad(f"{key}.{tool}", "must be a tool name (no patterns)")
                if tool != "total":
                    per_tool[tool] = count(f"{key}.{tool}", value, minimum=1)
            total = limits.get("total")
            if not per_tool and total is None:
                raise bad(key, "give total = N, a tool's cap, or both")
            found.append(
                CapConfig(
                    scope=scope,
                    window_name=name,
                    window=window,
                    per_tool=per_tool,
                    total=count(f"{key}.total", total, minimum=1) if total is not None else None,
                )
            )
    return tuple(found)

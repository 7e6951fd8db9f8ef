"""The ``loopware gateway`` configuration file (TOML), read and checked up front.

::

    [[upstream]]                 # one table per upstream MCP server (at least one)
    name = "git"                 # a label for logs
    command = ["python", "-m", "mcp_server_git", "--repository", "/srv/repo"]   # or url = "http://..."
    prefix = "git_"              # put before every tool name (optional)
    allow = ["git_status", "git_log"]   # server tool names to offer (optional, globs)
    timeout = 30                 # seconds per call (optional, default 60)

    [policy]                     # ToolPolicy (globs on the gateway's tool names)
    allow = ["git_*", "time_*"]
    deny = ["git_commit"]

    [limits]                     # ToolCallLimit, per principal
    total = 200
    per_tool = { git_log = 20 }

    [repetition]                 # RepetitionDetector
    threshold = 3

    [approval]                   # ApprovalGate: one of command / webhook / prompt
    tools = ["git_add"]
    command = ["/usr/local/bin/approve"]   # exit status 0 approves; the call is JSON on stdin
    # webhook = "https://approvals.example/hook"   # POST JSON; answer {"approved": true}
    # prompt = true                                # ask on the terminal (/dev/tty)
    timeout = 120

    [audit]
    path = "gateway-audit.jsonl"   # .sqlite or .db: SqliteAuditSink, else JsonlAuditSink
    synchronous = "full"           # or "normal": rows survive a process kill, not power loss

    [gateway]
    session_idle_timeout = 3600    # seconds a principal may stay silent before its turn ends
    roll_over = 1000               # calls per turn; the next turn carries the counts
    max_concurrent = 8             # calls of one principal running at once

    [auth]                       # HTTP clients: see loopware_cli/_gateway_config_auth.py

    [caps.principal]             # calls per window: see loopware_cli/_gateway_config_caps.py
    per_minute = { total = 60 }

A bad file raises `GatewayConfigError` naming the key.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ._gateway_config_auth import AuthConfig, parse_auth
from ._gateway_config_caps import CapConfig, parse_caps
from ._gateway_config_errors import GatewayConfigError, bad, count, seconds, strings
from ._gateway_config_errors import table as table_of

__all__ = ["ApprovalConfig", "GatewayConfig", "GatewayConfigError", "UpstreamConfig", "load_config"]


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    """One upstream MCP server."""

    name: str
    """A label for logs and errors."""
    server: str | tuple[str, ...]
    """Its URL (streamable HTTP) or command line (stdio)."""
    prefix: str = ""
    """Put before each of its tool names."""
    allow: tuple[str, ...] | None = None
    """Its tool names (globs) to offer; None offers all."""
    timeout: float = 60.0
    """Seconds one call may take."""
    env: dict[str, str] | None = None
    """Extra environment variables for a stdio server."""
    cwd: str | None = None
    """The working directory of a stdio server."""


@dataclass(frozen=True, slots=True)
class ApprovalConfig:
    """Who approves calls to matching tools."""

    tools: tuple[str, ...]
    """Tool names (globs) that need approval."""
    command: tuple[str, ...] | None = None
    """A command run per call: the call as JSON on stdin, exit status 0 approves."""
    webhook: str | None = None
    """A URL the call is POSTed to as JSON; ``{"approved": true}`` approves."""
    prompt: bool = False
    """Ask on the terminal (``/dev/tty``)."""
    timeout: float = 120.0
    """Seconds an approval may take; past it the call is denied."""


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """The whole configuration."""

    upstreams: tuple[UpstreamConfig, ...]
    """The upstream servers, in file order."""
    allow: tuple[str, ...] | None = None
    """`ToolPolicy` allow globs (None allows every tool not denied)."""
    deny: tuple[str, ...] = ()
    """`ToolPolicy` deny globs."""
    limits: dict[str, int] = field(default_factory=dict)
    """`ToolCallLimit` per-tool limits."""
    total: int | None = None
    """`ToolCallLimit` total limit."""
    repetition: int | None = None
    """`RepetitionDetector` threshold (None: no detector)."""
    approval: ApprovalConfig | None = None
    """`ApprovalGate` settings (None: no gate)."""
    audit: Path | None = None
    """The audit file (None: no audit log)."""
    audit_synchronous: str = "full"
    """The audit sink's durability: ``"full"`` (fsync every append) or ``"normal"``."""
    session_idle_timeout: float = 3600.0
    """Seconds a principal may stay silent before its turn ends (its counts are carried)."""
    roll_over: int = 1000
    """Calls after which a principal's turn ends and the next begins, counts carried: what a
    long session holds (records, the store's rows) stays under two turns' worth."""
    max_concurrent: int = 8
    """Calls of one principal that may run at once (more wait their turn)."""
    auth: AuthConfig | None = None
    """Who may call over HTTP (None: nobody authenticates; loopback addresses only)."""
    caps: tuple[CapConfig, ...] = ()
    """Gateway-wide caps over time windows, per principal and in total."""


def _upstream(n: int, raw: object, base: Path) -> UpstreamConfig:
    key = f"upstream[{n}]"
    table = table_of(key, raw)
    known = {"name", "command", "url", "prefix", "allow", "timeout", "env", "cwd"}
    if unknown := sorted(set(table) - known):
        raise bad(key, f"unknown keys {unknown}")
    if ("command" in table) == ("url" in table):
        raise bad(key, "give exactly one of command and url")
    server: str | tuple[str, ...]
    if "url" in table:
        url = table["url"]
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise bad(f"{key}.url", "must be an http:// or https:// URL")
        server = url
    else:
        server = strings(f"{key}.command", table["command"])
        if not server:
            raise bad(f"{key}.command", "must not be empty")
    name = table.get("name", f"upstream{n}")
    prefix = table.get("prefix", "")
    if not isinstance(name, str) or not name:
        raise bad(f"{key}.name", "must be a non-empty string")
    if not isinstance(prefix, str):
        raise bad(f"{key}.prefix", "must be a string")
    env = table.get("env")
    if env is not None and not (
        isinstance(env, dict) and all(isinstance(v, str) for v in env.values())
    ):
        raise bad(f"{key}.env", "must be a table of strings")
    cwd = table.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise bad(f"{key}.cwd", "must be a string")
    return UpstreamConfig(
        name=name,
        server=server,
        prefix=prefix,
        allow=strings(f"{key}.allow", table["allow"]) if "allow" in table else None,
        timeout=seconds(f"{key}.timeout", table.get("timeout", 60.0)),
        env=env,
        cwd=str(base / cwd) if cwd is not None else None,
    )


def _approval(raw: object) -> ApprovalConfig:
    table = table_of("approval", raw)
    known = {"tools", "command", "webhook", "prompt", "timeout"}
    if unknown := sorted(set(table) - known):
        raise bad("approval", f"unknown keys {unknown}")
    ways = [k for k in ("command", "webhook", "prompt") if table.get(k) not in (None, False)]
    if len(ways) != 1:
        raise bad("approval", "give exactly one of command, webhook and prompt = true")
    webhook = table.get("webhook")
    if webhook is not None and (
        not isinstance(webhook, str) or not webhook.startswith(("http://", "https://"))
    ):
        raise bad("approval.webhook", "must be an http:// or https:// URL")
    prompt = table.get("prompt", False)
    if not isinstance(prompt, bool):
        raise bad("approval.prompt", "must be true or false")
    return ApprovalConfig(
        tools=strings("approval.tools", table.get("tools")),
        command=strings("approval.command", table["command"]) if "command" in table else None,
        webhook=webhook,
        prompt=prompt,
        timeout=seconds("approval.timeout", table.get("timeout", 120.0)),
    )


def load_config(path: str | Path) -> GatewayConfig:
    """Read and check the gateway configuration at ``path``.

    Relative paths in it (``audit.path``, ``upstream.cwd``) are relative to the file.

    Raises:
        GatewayConfigError: the file is unreadable, not TOML, or has a bad key.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GatewayConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise GatewayConfigError(f"{path} is not valid TOML: {exc}") from None
    base = path.parent
    known = {"upstream", "policy", "limits", "repetition", "approval", "audit", "gateway"}
    known |= {"auth", "caps"}
    if unknown := sorted(set(data) - known):
        raise bad("(top level)", f"unknown tables {unknown}")
    raw_upstreams = data.get("upstream")
    if not isinstance(raw_upstreams, list) or not raw_upstreams:
        raise bad("upstream", "give at least one [[upstream]] table")
    upstreams = tuple(_upstream(n, raw, base) for n, raw in enumerate(raw_upstreams))
    policy = table_of("policy", data.get("policy", {}))
    limits = table_of("limits", data.get("limits", {}))
    per_tool = table_of("limits.per_tool", limits.get("per_tool", {}))
    repetition = table_of("repetition", data.get("repetition", {}))
    audit = table_of("audit", data.get("audit", {}))
    gateway = table_of("gateway", data.get("gateway", {}))
    audit_path = audit.get("path")
    if audit_path is not None and not isinstance(audit_path, str):
        raise bad("audit.path", "must be a string")
    synchronous = audit.get("synchronous", "full")
    if synchronous not in ("full", "normal"):
        raise bad("audit.synchronous", f"must be 'full' or 'normal', got {synchronous!r}")
    threshold = repetition.get("threshold")
    if unknown := sorted(set(gateway) - _GATEWAY_KEYS):
        raise bad("gateway", f"unknown keys {unknown}")
    return GatewayConfig(
        upstreams=upstreams,
        allow=strings("policy.allow", policy["allow"]) if "allow" in policy else None,
        deny=strings("policy.deny", policy.get("deny", [])),
        limits={k: count(f"limits.per_tool.{k}", v) for k, v in per_tool.items()},
        total=count("limits.total", limits["total"]) if "total" in limits else None,
        repetition=count("repetition.threshold", threshold) if threshold is not None else None,
        approval=_approval(data["approval"]) if "approval" in data else None,
        audit=(base / audit_path) if audit_path is not None else None,
        audit_synchronous=synchronous,
        session_idle_timeout=seconds(
            "gateway.session_idle_timeout", gateway.get("session_idle_timeout", 3600.0)
        ),
        roll_over=count("gateway.roll_over", gateway.get("roll_over", 1000), minimum=1),
        max_concurrent=count("gateway.max_concurrent", gateway.get("max_concurrent", 8), minimum=1),
        auth=parse_auth(data["auth"], base) if "auth" in data else None,
        caps=parse_caps(data["caps"]) if "caps" in data else (),
    )


_GATEWAY_KEYS = frozenset({"session_idle_timeout", "roll_over", "max_concurrent"})

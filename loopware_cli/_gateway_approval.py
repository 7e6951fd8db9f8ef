"""Approvers for the gateway's `ApprovalGate`: a command, a webhook or a terminal prompt.

The command and the webhook receive the call as one JSON object:

- ``tool``, ``call_id``, ``args`` (the validated arguments the handler will receive), ``reason``
  (the gate's text): the fields every receiver has always had;
- ``gate`` (the gate's id), ``principal`` (who called), ``conversation`` and ``turn_id`` (the
  gateway turn the call runs in, as its audit rows name them), ``timeout`` (seconds the
  gateway waits for the answer): added for receivers that record who answered
  (``loopware console``); receivers that do not know them ignore them.

Each answers True (approve) or False (reject); any failure (the command cannot start, the
webhook is down, no terminal) rejects, so a broken approver never lets a call through. A
webhook's rejection may carry a ``reason`` (and ``by``): the model then reads it. The
`ApprovalGate`'s own timeout bounds every wait.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

from pipeline import Gate

from ._gateway_config import ApprovalConfig

__all__ = ["CALLER", "build_approver"]

CALLER: contextvars.ContextVar[dict[str, str | None] | None] = contextvars.ContextVar(
    "loopware_gateway_caller", default=None
)
"""Who makes the call being run: ``principal``, ``conversation``, ``turn_id`` (set by the
principal's `Session` around each call; the approver reads it, as the gate does not hold it)."""


def _request(gate: Gate[Any], timeout: float | None = None) -> bytes:
    payload = gate.payload if isinstance(gate.payload, dict) else {}
    caller = CALLER.get() or {}
    body = {
        "tool": payload.get("tool"),
        "call_id": payload.get("call_id"),
        "args": payload.get("args"),
        "reason": gate.reason,
        "gate": gate.id,
        "principal": caller.get("principal"),
        "conversation": caller.get("conversation"),
        "turn_id": caller.get("turn_id"),
        "timeout": timeout,
    }
    return json.dumps(body, default=str).encode("utf-8")


def _command(argv: tuple[str, ...], timeout: float) -> Callable[[Gate[Any]], Awaitable[bool]]:
    async def approve_by_command(gate: Gate[Any]) -> bool:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            await process.communicate(_request(gate, timeout))
        except asyncio.CancelledError:  # the gate timed out or the turn ended
            process.kill()
            await process.wait()
            raise
        return process.returncode == 0

    return approve_by_command


def _post(url: str, body: bytes, timeout: float) -> object:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:  # the configured URL
        answer: object = json.loads(response.read(65536) or b"{}")
    return answer


def _webhook(url: str, timeout: float) -> Callable[[Gate[Any]], Awaitable[bool]]:
    async def approve_by_webhook(gate: Gate[Any]) -> bool:
        answer = await asyncio.to_thread(_post, url, _request(gate, timeout), timeout)
        if not isinstance(answer, dict):
            return False
        if answer.get("approved") is True:
            return True
        reason, by = answer.get("reason"), answer.get("by")
        if isinstance(reason, str) and reason.strip():  # the model reads who said no, and why
            who = f"rejected by {by}" if isinstance(by, str) and by else "rejected"
            gate.reject(f"{who}: {reason.strip()[:1000]}")
        return False

    return approve_by_webhook


def _ask(question: str, terminal: str) -> bool:
    with open(terminal, "rb+", buffering=0) as tty:  # unbuffered: a terminal is not seekable
        tty.write(question.encode("utf-8"))
        answer = tty.readline(1024).decode("utf-8", "replace")
    return answer.strip().lower() in ("y", "yes")


def _prompt(terminal: str) -> Callable[[Gate[Any]], Awaitable[bool]]:
    lock = asyncio.Lock()  # one question on the terminal at a time

    async def approve_on_terminal(gate: Gate[Any]) -> bool:
        payload = gate.payload if isinstance(gate.payload, dict) else {}
        question = (
            f"\nloopware gateway: allow {payload.get('tool')} "
            f"{json.dumps(payload.get('args'), default=str)[:500]}? [y/N] "
        )
        async with lock:
            return await asyncio.to_thread(_ask, question, terminal)

    return approve_on_terminal


def build_approver(
    config: ApprovalConfig, terminal: str = "/dev/tty"
) -> Callable[[Gate[Any]], Awaitable[bool]]:
    """The approver the configuration names (exactly one way is configured).

    ``terminal`` is where the prompt approver asks (the controlling terminal by default: on
    stdio, standard input and output carry MCP).
    """
    if config.command is not None:
        return _command(config.command, config.timeout)
    if config.webhook is not None:
        return _webhook(config.webhook, config.timeout)
    return _prompt(terminal)

"""The console's pages: turns, one turn, approvals, the audit chain; the answer form's endpoint.

The approvals page lists the durable runner's gates and the MCP gateway's approvals waiting on
the console's webhook (``_console_hooks.py``); one form answers both, with the same CSRF check.

Server-rendered with Jinja2 (autoescape on: every value a model or a tool wrote is text on the
page, never markup) on Starlette's routing. The one script is ``static/console.js``: it polls
``/state`` (the chain's rows and the waiting gates) and reloads the page when it changed, unless
a reason is being typed. Filters live in the query string, so a page's address can be shared
with whoever else holds the token on this host.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from middleware.audit import AuditRow
from pipeline.durable import GateNotWaitingError, WaitingGate

from ._audit import DECISION_WORDS
from ._console_auth import SECURITY_HEADERS, ConsoleAuth, TokenGate
from ._console_data import (
    answers_of,
    calls_of,
    chain_view,
    gate_views,
    hook_view,
    result_preview,
    turns_of,
)
from ._console_hooks import HookApprovals, HookDoor, HookEndpoint
from ._console_sources import (
    ANSWER_POLICY,
    AnswerNotRecordedError,
    ConsoleSources,
    GateAnswer,
    HookNotWaitingError,
)
from ._console_views import Filters

__all__ = ["console_app"]

_HERE = Path(__file__).parent


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("loopware_cli", "_console_templates"),
        autoescape=True,  # every page: model and tool text is data, never markup
        undefined=jinja2.StrictUndefined,
    )
    env.filters["ms"] = lambda v: "-" if v is None else f"{v:.0f} ms"
    return Jinja2Templates(env=env)


class _Pages:
    """The endpoints, over the console's sources, auth and templates."""

    def __init__(
        self,
        sources: Callable[[], ConsoleSources],
        auth: ConsoleAuth,
        answerer: str,
        hooks: HookApprovals,
    ) -> None:
        self.sources = sources
        self.auth = auth
        self.hooks = hooks
        self.answerer = answerer
        self.templates = _templates()

    def _render(self, request: Request, name: str, state: str, **context: Any) -> Response:
        session = self.auth.session_of(request) or ""
        context.setdefault("problem", None)
        context.update(
            csrf=self.auth.csrf_for(session),
            state=state,
            answerer=self.answerer,
            decisions=DECISION_WORDS,
            page=name.removesuffix(".html"),
        )
        return self.templates.TemplateResponse(request, name, context)

    async def _state(self) -> tuple[str, list[WaitingGate]]:
        sources = self.sources()
        rows = await sources.fingerprint()
        gates = await sources.waiting()
        held = sorted(g["gate_id"] for g in gates) + [a.hook_id for a in self.hooks.pending()]
        text = f"{rows}:{len(self.hooks.expired())}:" + ",".join(held)
        return hashlib.sha256(text.encode()).hexdigest()[:16], gates

    async def _rows(self, context: dict[str, Any]) -> list[AuditRow]:
        """The chain's rows; none, and the reason in ``context``, when a row does not parse."""
        try:
            return await self.sources().rows()
        except ValueError as exc:
            context["problem"] = f"{exc} (the chain's verification below locates it)"
            return []

    async def state(self, request: Request) -> Response:
        """What changes the pages: a digest of the chain's rows and the waiting gates."""
        digest, _ = await self._state()
        return PlainTextResponse(digest)

    async def turns(self, request: Request) -> Response:
        """The turns, latest first, filtered by conversation, tool and decision."""
        sources = self.sources()
        filters = Filters.from_query(request.query_params)
        digest, gates = await self._state()
        problem: dict[str, Any] = {}
        rows = await self._rows(problem)
        waiting = [g.turn_id for g in gate_views(gates)]
        every = turns_of(rows, waiting=waiting)
        usage = await sources.usage([t.turn_id for t in every if t.status != "waiting"])
        turns = [t for t in turns_of(rows, waiting=waiting, usage=usage) if filters.keeps_turn(t)]
        return self._render(
            request,
            "turns.html",
            digest,
            **problem,
            turns=turns,
            filters=filters,
            gates=len(gates) + len(self.hooks),
            chain=chain_view(await sources.verify()),
            conversations=sorted({t.conversation_id for t in every if t.conversation_id}),
            tools=sorted({c.tool for c in calls_of(rows)}),
        )

    async def turn(self, request: Request) -> Response:
        """One turn: its calls in order, each with its decisions, arguments and result."""
        sources = self.sources()
        turn_id = request.path_params["turn_id"]
        digest, gates = await self._state()
        held = [g for g in gate_views(gates) if g.turn_id == turn_id]
        problem: dict[str, Any] = {}
        rows = await self._rows(problem)
        waiting = [g.turn_id for g in held]
        found = [t for t in turns_of(rows, waiting=waiting) if t.turn_id == turn_id]
        if not found:
            return self._render(request, "missing.html", digest, turn_id=turn_id, **problem)
        turn = found[0]
        usage = await sources.usage([turn_id]) if turn.status != "waiting" else {}
        stored = {c.id: result_preview(c) for c in await sources.stored_calls(turn_id)}
        calls = [replace(c, result=stored.get(c.call_id)) for c in turn.calls]
        return self._render(
            request,
            "turn.html",
            digest,
            **problem,
            turn=turn,
            usage=usage.get(turn_id),
            calls=calls,
            gates=held,
            filters=Filters.from_query(request.query_params),
        )

    async def gates(self, request: Request) -> Response:
        """The waiting gates with their answer forms, and the answers given so far."""
        sources = self.sources()
        digest, gates = await self._state()
        problem: dict[str, Any] = {}
        rows = await self._rows(problem)
        return self._render(
            request,
            "gates.html",
            digest,
            **problem,
            gates=gate_views(gates),
            hooks=[hook_view(a) for a in self.hooks.pending()],
            expired=self.hooks.expired()[:10],
            answers=answers_of(rows)[:50],
            durable=sources.client is not None,
            done=request.query_params.get("done", ""),
            failed=request.query_params.get("error", ""),
        )

    async def audit(self, request: Request) -> Response:
        """The chain's verification and its rows, filtered."""
        sources = self.sources()
        filters = Filters.from_query(request.query_params)
        digest, _ = await self._state()
        problem: dict[str, Any] = {}
        rows = await self._rows(problem)
        kept = [
            r
            for r in rows
            if (not filters.conversation or r.entry.conversation_id == filters.conversation)
            and (not filters.tool or r.entry.tool == filters.tool)
            and (not filters.decision or r.entry.decision == filters.decision)
        ]
        chain = chain_view(await sources.verify())
        return self._render(
            request,
            "audit.html",
            digest,
            rows=kept,
            chain=chain,
            filters=filters,
            total=len(rows),
            **problem,
        )

    async def answer(self, request: Request) -> Response:
        """Approve or reject a gate (the form's POST): CSRF checked before anything happens."""
        session = self.auth.session_of(request)
        form = await request.form()
        csrf, gate_id = str(form.get("csrf", "")), str(form.get("gate_id", ""))
        hook_id = str(form.get("hook_id", ""))
        decision, reason = str(form.get("decision", "")), str(form.get("reason", ""))
        if session is None or not self.auth.csrf_matches(session, csrf):
            return PlainTextResponse(
                "loopware console: the form's CSRF value is missing or wrong\n", status_code=403
            )
        if decision not in ("approve", "reject") or not (gate_id or hook_id):
            return PlainTextResponse("loopware console: bad answer\n", status_code=400)
        if hook_id:
            return await self._answer_hook(hook_id, decision == "approve", reason)
        answer = GateAnswer(gate_id=gate_id, approve=decision == "approve", reason=reason)
        try:
            await self.sources().answer(answer)
        except (GateNotWaitingError, AnswerNotRecordedError) as exc:
            return RedirectResponse("/gates?" + urlencode({"error": str(exc)}), status_code=303)
        said = "approved" if answer.approve else "rejected"
        return RedirectResponse(
            "/gates?" + urlencode({"done": f"{said} {gate_id}"}), status_code=303
        )

    async def _answer_hook(self, hook_id: str, approve: bool, reason: str) -> Response:
        """Answer one of the MCP gateway's approvals (its row first, then the webhook)."""
        answer = GateAnswer(gate_id=hook_id, approve=approve, reason=reason)
        try:
            row = await self.sources().answer_hook(self.hooks, answer)
        except (HookNotWaitingError, AnswerNotRecordedError) as exc:
            return RedirectResponse("/gates?" + urlencode({"error": str(exc)}), status_code=303)
        said = "approved" if approve else "rejected"
        done = f"{said} {row.entry.tool} call {row.entry.call_id} (from the MCP gateway)"
        return RedirectResponse("/gates?" + urlencode({"done": done}), status_code=303)


def console_app(
    open_sources: Callable[[], ConsoleSources],
    auth: ConsoleAuth,
    *,
    answerer: str,
    allowed_hosts: list[str],
    hook_token: str | None = None,
) -> Starlette:
    """The console's ASGI app; ``open_sources`` opens the stores when the app starts.

    With ``hook_token``, ``POST /hooks/approval?token=HOOK_TOKEN`` takes the MCP gateway's
    approvals (``loopware_cli/_console_hooks.py``); without it that path answers 404.
    """
    opened: list[ConsoleSources] = []
    hooks = HookApprovals()
    endpoint = (
        None
        if hook_token is None
        else HookEndpoint(hooks, hook_token, f"{ANSWER_POLICY}:{answerer}", SECURITY_HEADERS)
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        opened.append(open_sources())  # on the server's loop: the sink appends from it
        try:
            yield
        finally:
            opened.pop().close()

    pages = _Pages(lambda: opened[0], auth, answerer, hooks)
    routes = [
        Route("/", pages.turns),
        Route("/turns/{turn_id:path}", pages.turn),
        Route("/gates", pages.gates),
        Route("/answer", pages.answer, methods=["POST"]),
        Route("/audit", pages.audit),
        Route("/state", pages.state),
        Mount("/static", StaticFiles(directory=_HERE / "_console_static"), name="static"),
    ]
    middleware = [
        Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts),
        Middleware(HookDoor, endpoint=endpoint),  # the webhook: its own token, no session
        Middleware(TokenGate, auth=auth),
    ]
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)

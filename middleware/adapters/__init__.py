"""loopware's stack inside the agent frameworks people already use (docs/adapters/).

One module per host, each importing its host's SDK on first use (extras ``pydantic-ai``,
``langchain``, ``openai-agents``, ``adk``, or ``adapters`` for all):
`middleware.adapters.pydantic_ai` (``LoopwareCapability``), `middleware.adapters.langchain`
(``LoopwareMiddleware``), `middleware.adapters.openai_agents` (``Loopware``) and
`middleware.adapters.adk` (``LoopwarePlugin``). Each is built with ``middleware=[...]``,
the list ``TurnRunner(middleware=[...])`` takes, on `pipeline.hosted`.
"""

__all__: list[str] = []

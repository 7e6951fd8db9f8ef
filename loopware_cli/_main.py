"""The ``loopware`` command: ``demo``, ``run``, ``replay`` and ``pipelines``.

``main(argv)`` returns the exit status instead of exiting, so it can be called in-process; the
console script (``loopware = "loopware_cli._main:main"``) exits with it. Exit statuses are listed in
`EXIT_STATUS_HELP` and shown by ``--help``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final, Protocol

from pipeline import LoopError

from ._replay import replay_transcript
from ._replay_render import format_issue, render_report
from ._replay_transcript import read_transcript
from ._resolve import resolve_middleware, resolve_runner
from ._style import Style

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_BAD_TARGET",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "build_parser",
    "main",
]

EXIT_OK: Final = 0
"""Success."""
EXIT_REFUSED: Final = 1
"""replay: the stack denied or rejected a recorded call, or a turn failed; demo: it failed."""
EXIT_USAGE: Final = 2
"""Bad options or arguments (argparse's own status)."""
EXIT_BAD_INPUT: Final = 3
"""The transcript file is unreadable or malformed (the readable part is still reported)."""
EXIT_BAD_TARGET: Final = 4
"""A ``module:attr`` target cannot be imported, is missing, or is not middleware / a runner."""

EXIT_STATUS_HELP: Final = """\
exit status:
  0  success; for replay: every recorded call was allowed, warned about or hidden
     and every replayed turn completed
  1  run: the turn failed or was aborted (a policy nack, a provider error);
     replay: the stack denied or rejected at least one recorded call, or a
     replayed turn failed (a nack such as PolicyViolationError, or a middleware
     error); demo: the audit file cannot be written, the scripted turn did not
     complete, or the audit chain did not verify
  2  usage error: unknown option, missing argument (argparse)
  3  bad input file: unreadable, not UTF-8, invalid or truncated JSON, malformed
     messages or non-JSON tool arguments; errors are printed on stderr as
     FILE:LINE:COLUMN: CODE: messages[INDEX]: what is wrong, and the readable part
     of the transcript is still replayed and reported
  4  bad module:attr: the module cannot be imported, the attribute is missing, or
     it is not middleware (replay, run) / not tools (run) / not a TurnRunner
     (pipelines); a factory that needs arguments or raises counts too
  5  run: the model cannot be used: its API key is not set or was refused, or the
     model string is not one loopware knows
When several apply, 4 wins over 3, and 3 over 1."""

_DESCRIPTION: Final = "loopware: a typed framework for the tool-calling loop of LLM agents."

_REPLAY_DESCRIPTION: Final = """\
Feed a recorded conversation through a middleware stack, offline, and report what
the stack would have done at each recorded tool call: allowed, hidden (repeat
detected, limit reached), denied, warned, or not reached because the stack ended
the turn earlier.

TRANSCRIPT is an OpenAI chat-completions message list (assistant "tool_calls" and
"tool" messages) or Anthropic messages ("tool_use" / "tool_result" blocks), as a
JSON array, an object with a "messages" array (Anthropic's "system" is kept), or
JSON Lines (.jsonl / .ndjson, one message per line). Each user message starts a
turn. Tool schemas are not needed: every recorded tool accepts any JSON object and
returns its recorded result. Turns share one conversation, so repeat counts carry
over between turns (use --separate-turns to reset them)."""

_MIDDLEWARE_HELP: Final = (
    "middleware to replay through, as module:attr (repeatable, outermost first): a "
    "Middleware set, a middleware instance, a list of them, or a zero-argument factory "
    "returning one (a class such as middleware:RepetitionDetector is called with its "
    "defaults); the current directory is importable"
)


def _version() -> str:
    try:
        return version("loopware")
    except PackageNotFoundError:
        return "unknown (not installed)"


class _Subparsers(Protocol):
    """What `_subparser` needs of ``parser.add_subparsers()``."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


def _subparser(
    sub: _Subparsers,
    name: str,
    help: str,
    description: str,
    handler: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        name,
        help=help,
        description=description,
        epilog=EXIT_STATUS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=handler)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``loopware`` command (one subparser per subcommand)."""
    parser = argparse.ArgumentParser(
        prog="loopware",
        description=_DESCRIPTION,
        epilog=EXIT_STATUS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"loopware {_version()}")
    sub = parser.add_subparsers(title="commands")
    demo = _subparser(
        sub,
        "demo",
        "run a scripted support-agent turn through a policy stack",
        "Run a scripted support-agent turn (no network, no API keys) through ToolPolicy,\n"
        "RepetitionDetector, ToolCallLimit and an AuditLog written to\n"
        "./loopware-demo-audit.sqlite (recreated on every run). Each iteration is shown\n"
        "with the tools offered, every call, its result and the stack's decision, then a\n"
        "summary table. Colour is used on a terminal unless NO_COLOR is set.",
        _run_demo,
    )
    demo.add_argument("--plain", action="store_true", help="no colour, even on a terminal")
    replay = _subparser(
        sub,
        "replay",
        "replay a recorded conversation through a middleware stack",
        _REPLAY_DESCRIPTION,
        _run_replay,
    )
    replay.add_argument("transcript", metavar="TRANSCRIPT", help="the recorded conversation")
    replay.add_argument(
        "-m",
        "--middleware",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help=_MIDDLEWARE_HELP,
    )
    replay.add_argument("--json", action="store_true", help="print a machine-readable report")
    replay.add_argument(
        "--separate-turns",
        action="store_true",
        help="replay every turn on its own (no conversation history between turns)",
    )
    replay.add_argument("--plain", action="store_true", help="no colour, even on a terminal")
    run = _subparser(
        sub,
        "run",
        "run one real turn against a real model through a middleware stack",
        "Run one turn of PROMPT against a real model (OPENAI_API_KEY or ANTHROPIC_API_KEY\n"
        "must be set; a local OpenAI-compatible server needs none) with the tools and\n"
        "middleware named as module:attr. The answer streams as it arrives; each iteration\n"
        "is printed with the tools offered, every call, its result and the stack's\n"
        "decisions, then a summary with the token usage. No key? `loopware demo` runs a\n"
        "scripted model offline.",
        _run_run,
    )
    run.add_argument("prompt", metavar="PROMPT", help="the user input of the turn")
    run.add_argument(
        "--model",
        required=True,
        metavar="SPEC",
        help="openai:<model>, openai-responses:<model>, anthropic:<model> or "
        "openai-compatible:<name>@<base_url>",
    )
    run.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="tools to offer (repeatable): a Tool, a list of tools, a ToolRegistry, or a "
        "zero-argument factory returning one; the current directory is importable",
    )
    run.add_argument(
        "-m",
        "--middleware",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="middleware to run through (repeatable, outermost first), as for replay",
    )
    run.add_argument("--system", default=None, help="the system prompt")
    run.add_argument(
        "--max-iterations", type=int, default=20, help="the iteration cap (default 20)"
    )
    run.add_argument("--plain", action="store_true", help="no colour, even on a terminal")
    pipelines = _subparser(
        sub,
        "pipelines",
        "print the middleware order of every stage of a runner",
        "Print each stage of a TurnRunner (turn_input, dispatch_input, dispatch_output,\n"
        "turn_output) with its middleware names in execution order, outermost first.\n"
        "MODULE:ATTR names a TurnRunner or a zero-argument factory returning one; the\n"
        "current directory is importable.",
        _run_pipelines,
    )
    pipelines.add_argument("target", metavar="MODULE:ATTR", help="the runner (or its factory)")
    pipelines.add_argument("--json", action="store_true", help="print the stages as JSON")
    _add_durable_commands(sub)
    return parser


def _add_durable_commands(sub: _Subparsers) -> None:
    from ._approve import APPROVE_DESCRIPTION, add_approve_arguments, run_approve
    from ._worker import WORKER_DESCRIPTION, add_worker_arguments, run_worker

    worker = _subparser(sub, "worker", "run queued durable turns", WORKER_DESCRIPTION, run_worker)
    add_worker_arguments(worker)
    approve = _subparser(
        sub, "approve", "settle a gate a durable turn waits on", APPROVE_DESCRIPTION, run_approve
    )
    add_approve_arguments(approve)


def _error(command: str, message: str) -> None:
    print(f"loopware {command}: error: {message}", file=sys.stderr)


def _run_demo(args: argparse.Namespace) -> int:
    from ._demo import run_demo  # its tools and stack are built only when asked for

    return run_demo(sys.stdout, plain=args.plain)


def _run_run(args: argparse.Namespace) -> int:
    from ._run import RunOptions, run_turn  # provider SDKs load only when a turn runs

    options = RunOptions(
        prompt=args.prompt,
        model=args.model,
        tools=list(args.tools),
        middleware=list(args.middleware),
        system_prompt=args.system,
        max_iterations=args.max_iterations,
        plain=args.plain,
    )
    return run_turn(options, sys.stdout)


def _run_replay(args: argparse.Namespace) -> int:
    items: list[object] = []
    for spec in args.middleware:
        try:
            items.extend(resolve_middleware(spec))
        except LoopError as exc:
            _error("replay", str(exc))
            return EXIT_BAD_TARGET
    transcript = read_transcript(args.transcript)
    for issue in transcript.issues:
        print(format_issue(issue, transcript.source), file=sys.stderr)
    try:
        report = asyncio.run(
            replay_transcript(
                transcript,
                items,
                separate_turns=args.separate_turns,
                sources=args.middleware,
            )
        )
    except LoopError as exc:  # the items cannot be composed into a runner
        _error("replay", str(exc))
        return EXIT_BAD_TARGET
    if args.json:
        print(report.to_json())
    else:
        print(render_report(report, Style.for_stream(sys.stdout, plain=args.plain)))
    if transcript.issues:
        return EXIT_BAD_INPUT
    return EXIT_REFUSED if report.refused else EXIT_OK


def _run_pipelines(args: argparse.Namespace) -> int:
    try:
        runner = resolve_runner(args.target)
    except LoopError as exc:
        _error("pipelines", str(exc))
        return EXIT_BAD_TARGET
    stages = runner.describe_pipelines()
    if args.json:
        print(json.dumps(stages, indent=2))
        return EXIT_OK
    print(f"loopware pipelines: {args.target}")
    for stage, names in stages.items():
        print(f"{stage}:")
        if not names:
            print("  (none)")
        for position, name in enumerate(names, start=1):
            print(f"  {position}. {name}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``loopware`` command with ``argv`` (default ``sys.argv[1:]``); return its status.

    Never exits the interpreter: argparse's own exits (``--help``, usage errors) become the
    returned status.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) and usage errors (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return handler(args)
    except BrokenPipeError:  # `loopware replay ... | head`: stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())


main.__module__ = "loopware_cli"

"""The ``loopware`` command: ``demo``, ``run``, ``replay`` and ``pipelines``.

``main(argv)`` returns the exit status instead of exiting, so it can be called in-process; the
console script (``loopware = "loopware_cli._main:main"``) exits with it. Exit statuses are listed in
`EXIT_STATUS_HELP` and shown by ``--help``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final, Protocol

from pipeline.errors import LoopError

from ._replay import EXIT_MODEL_ERRORS, REPLAY_DESCRIPTION, add_replay_arguments, run_replay
from ._resolve import resolve_runner

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_BAD_TARGET",
    "EXIT_MODEL_ERRORS",
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
  0  success; for replay: no recorded call was denied or rejected (each was
     allowed, approved, warned about, answered, invalid or failed), and every
     replayed turn completed
  1  run: the turn failed or was aborted (a policy nack, a provider error);
     replay: the stack denied or rejected at least one recorded call, or a
     replayed turn failed (a nack such as PolicyViolationError, or a middleware
     error); demo: the audit file cannot be written, the scripted turn did not
     complete, or the audit chain did not verify
  2  usage error: unknown option, missing argument (argparse), or a policy
     option value the policy refuses (--repeat 1)
  3  bad input file: missing, unreadable, not UTF-8, invalid or truncated JSON,
     malformed messages; errors are printed on stderr as
     FILE:LINE:COLUMN: CODE: messages[INDEX]: what is wrong; the readable part
     of the transcript is still replayed and reported (nothing is reported when
     no message could be read)
  4  bad module:attr: the module cannot be imported, the attribute is missing, or
     it is not middleware or tools (replay, run) / not a TurnRunner
     (pipelines); a factory that needs arguments or raises counts too
  5  run: the model cannot be used: its API key is not set or was refused, or the
     model string is not one loopware knows
  6  replay: the transcript is readable but the recorded model made errors (tool
     arguments that are not a JSON object): those calls were replayed, as sent,
     and are invalid (E_TRANSCRIPT_ARGS lines on stderr)
When several apply, 4 wins over 3, 3 over 1, and 1 over 6."""

_DESCRIPTION: Final = "loopware: a typed framework for the tool-calling loop of LLM agents."


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
        "RepetitionDetector, ToolCallLimit and an AuditLog written to a temporary SQLite\n"
        "file (or to --audit PATH, recreated on every run); the output says where. Each\n"
        "iteration is shown with the tools offered, every call, its result and the stack's\n"
        "decision, then a summary table. Colour is used on a terminal unless NO_COLOR is set.",
        _run_demo,
    )
    demo.add_argument("--plain", action="store_true", help="no colour, even on a terminal")
    demo.add_argument("--audit", metavar="PATH", help="write the audit database to PATH")
    replay = _subparser(
        sub,
        "replay",
        "replay a recorded conversation through a middleware stack",
        REPLAY_DESCRIPTION,
        run_replay,
    )
    add_replay_arguments(replay)
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
    from ._gateway_server import add_gateway_command  # the MCP gateway

    add_gateway_command(sub)
    _add_durable_commands(sub)
    from ._audit import add_audit_command  # loopware audit verify|show

    add_audit_command(sub)
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

    return run_demo(sys.stdout, plain=args.plain, audit_path=args.audit)


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

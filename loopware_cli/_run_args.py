"""The arguments of ``loopware run``: parsed with argparse only, the turn imported when it runs."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_run_arguments", "run_command"]


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The description, the arguments and the handler of ``loopware run``."""
    parser.description = (
        "Run one turn of PROMPT against a real model (OPENAI_API_KEY or ANTHROPIC_API_KEY\n"
        "must be set; a local OpenAI-compatible server needs none) with the tools and\n"
        "middleware named as module:attr. The answer streams as it arrives; each iteration\n"
        "is printed with the tools offered, every call, its result and the stack's\n"
        "decisions, then a summary with the token usage. No key? `loopware demo` runs a\n"
        "scripted model offline."
    )
    parser.add_argument("prompt", metavar="PROMPT", help="the user input of the turn")
    parser.add_argument(
        "--model",
        required=True,
        metavar="SPEC",
        help="openai:<model>, openai-responses:<model>, anthropic:<model> or "
        "openai-compatible:<name>@<base_url>",
    )
    parser.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="tools to offer (repeatable): a Tool, a list of tools, a ToolRegistry, or a "
        "zero-argument factory returning one; the current directory is importable",
    )
    parser.add_argument(
        "-m",
        "--middleware",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="middleware to run through (repeatable, outermost first), as for replay",
    )
    parser.add_argument("--system", default=None, help="the system prompt")
    parser.add_argument(
        "--max-iterations", type=int, default=20, help="the iteration cap (default 20)"
    )
    parser.add_argument("--plain", action="store_true", help="no colour, even on a terminal")
    parser.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    """Run ``loopware run`` with its parsed arguments; return the exit status."""
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

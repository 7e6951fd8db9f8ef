"""``loopware replay``: a thin front end over `middleware.transcripts.replay`.

Reads the transcript, builds the stack from ``-m`` targets and the built-in policy options,
replays, prints the report (text or ``--json``) and turns what was found into the exit status.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import Counter
from typing import Any, Final, TextIO

from middleware.transcripts import Transcript, TranscriptIssue, read_transcript, replay
from pipeline import Tool
from pipeline.errors import LoopError, MissingExtraError

from ._replay_policy import add_policy_arguments, policy_flags, policy_middleware
from ._replay_render import format_issue, render_report
from ._resolve import resolve_middleware, resolve_tools
from ._style import Style

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_BAD_TARGET",
    "EXIT_MODEL_ERRORS",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "REPLAY_DESCRIPTION",
    "add_replay_arguments",
    "run_replay",
]

EXIT_OK: Final = 0
"""No recorded call was denied or rejected, and every replayed turn completed."""
EXIT_REFUSED: Final = 1
"""The stack denied or rejected a recorded call, or a replayed turn failed."""
EXIT_USAGE: Final = 2
"""Bad options (argparse), or a policy option value a policy refuses."""
EXIT_BAD_INPUT: Final = 3
"""The transcript file is unreadable or malformed (the readable part is still reported)."""
EXIT_BAD_TARGET: Final = 4
"""A ``module:attr`` target cannot be imported, is missing, or is not middleware."""
EXIT_MODEL_ERRORS: Final = 6
"""The transcript is fine but the recorded model made errors (tool arguments that are not a JSON
object); those calls were replayed and failed as they did."""

_SHOWN_PER_KIND: Final = 3
"""How many issues with the same code and text are printed before they are counted instead."""

REPLAY_DESCRIPTION: Final = """\
Feed a recorded conversation through a middleware stack, offline, and report what
the stack would have done at each recorded tool call. Each call gets its record's
verdict, the word `loopware run`, the audit log and tracing use: allowed, approved,
warned, answered (a middleware answered it), denied (refused; never ran, e.g. a
tool a limit hid), rejected (approval refused), invalid (arguments that are not a
JSON object or fail the schema, an unknown tool), failed (a middleware failed), or
not reached because the stack ended the turn earlier. A call that used up a limit
or repeated too often is allowed, and the tool it hid is shown under it; decisions
about no one call are shown where they were taken (iteration, after which call).

TRANSCRIPT is an OpenAI chat-completions message list (assistant "tool_calls" and
"tool" messages; arguments as text or an object), OpenAI Responses API items
("function_call", "function_call_output"), or Anthropic messages ("tool_use" /
"tool_result" / "thinking" blocks), as a JSON array, an object holding the list
("messages", or "input" / "output"), or JSON Lines (.jsonl / .ndjson, streamed).
Consecutive assistant entries are one message. Each user message starts a turn.
Tool schemas are not needed: every recorded tool accepts any JSON object and
returns its recorded result; a name loopware cannot register ("Final Answer") is
replayed, and matched by policies, under a safe alias ("Final_Answer"). With
--tools, the agent's real tools are offered instead (their handlers never run):
arguments are checked against their schemas and a name none of them has is an
unknown tool, as live. Turns share one conversation, so repeat counts carry over
(--separate-turns resets them).

The policy is the built-in options below and/or -m targets; with neither, every
call is allowed and the report says so. The same engine is a Python API:
middleware.transcripts.replay(transcript, middleware=[...])."""

_MIDDLEWARE_HELP: Final = (
    "middleware to replay through, as module:attr (repeatable, outermost first, after the "
    "built-in policy options): a Middleware set, a middleware instance, a list of them, or a "
    "zero-argument factory returning one (a class such as middleware:RepetitionDetector is "
    "called with its defaults); the current directory is importable"
)


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the replay subcommand's arguments to its parser."""
    parser.add_argument("transcript", metavar="TRANSCRIPT", help="the recorded conversation")
    parser.add_argument(
        "-m",
        "--middleware",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help=_MIDDLEWARE_HELP,
    )
    parser.add_argument(
        "--tools",
        action="append",
        default=None,
        metavar="MODULE:ATTR",
        help="the agent's real tools (repeatable: a Tool, a list of tools, a ToolRegistry, or a "
        "zero-argument factory returning one): recorded calls are checked against their names "
        "and schemas; their handlers never run",
    )
    parser.add_argument("--json", action="store_true", help="print a machine-readable report")
    parser.add_argument(
        "--separate-turns",
        action="store_true",
        help="replay every turn on its own (no conversation history between turns)",
    )
    parser.add_argument("--plain", action="store_true", help="no colour, even on a terminal")
    parser.add_argument(
        "--full-args",
        action="store_true",
        help="show each call's arguments whole (on a terminal they are cut at its width; "
        "written to a file or a pipe they are always whole)",
    )
    add_policy_arguments(parser)


def _error(message: str, err: TextIO) -> None:
    print(f"loopware replay: error: {message}", file=err)


def print_issues(transcript: Transcript, err: TextIO) -> None:
    """Print every issue as ``FILE:LINE:COLUMN: CODE: ...``, three of a kind at most.

    Past three issues with the same code and text, they are counted instead of repeated.
    """
    seen: Counter[tuple[str, str]] = Counter()
    first: dict[tuple[str, str], TranscriptIssue] = {}
    for issue in transcript.issues:
        key = (issue.code, issue.message)
        seen[key] += 1
        first.setdefault(key, issue)
        if seen[key] <= _SHOWN_PER_KIND:
            print(format_issue(issue, transcript.source), file=err)
    for key, count in seen.items():
        if count > _SHOWN_PER_KIND:
            print(
                f"{transcript.source}: {key[0]}: ... and {count - _SHOWN_PER_KIND} more like "
                f"this ({count} in all, first at {first[key].location()})",
                file=err,
            )


def run_replay(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run ``loopware replay`` with parsed ``args``; return the exit status."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        items = policy_middleware(args)
    except MissingExtraError:  # told once, by main(): exit 7
        raise
    except LoopError as exc:
        _error(str(exc), err)
        return EXIT_USAGE
    sources = policy_flags(args)
    for spec in args.middleware:
        try:
            items.extend(resolve_middleware(spec))
        except MissingExtraError:  # told once, by main(): exit 7
            raise
        except LoopError as exc:
            _error(str(exc), err)
            return EXIT_BAD_TARGET
        sources.append(spec)
    tools: list[Tool[Any]] | None = None
    if args.tools is not None:
        try:
            tools = [t for spec in args.tools for t in resolve_tools(spec)]
        except MissingExtraError:  # told once, by main(): exit 7
            raise
        except LoopError as exc:
            _error(str(exc), err)
            return EXIT_BAD_TARGET
    transcript = read_transcript(args.transcript)
    print_issues(transcript, err)
    if transcript.unreadable:
        return EXIT_BAD_INPUT
    try:
        report = replay(
            transcript, items, separate_turns=args.separate_turns, sources=sources, tools=tools
        )
    except MissingExtraError:  # told once, by main(): exit 7
        raise
    except LoopError as exc:  # the items cannot be composed into a runner
        _error(str(exc), err)
        return EXIT_BAD_TARGET
    if args.json:
        out.writelines(report.iter_json())  # piece by piece: a report can be large
        out.write("\n")
    else:
        style = Style.for_stream(out, plain=args.plain)
        print(render_report(report, style, _width(out, whole=args.full_args)), file=out)
    return exit_status(transcript, report.refused)


def _width(out: TextIO, *, whole: bool) -> int | None:
    """The terminal's width when ``out`` is one (None: arguments whole, for files and pipes)."""
    isatty = getattr(out, "isatty", None)
    try:
        on_terminal = bool(isatty()) if callable(isatty) else False
    except ValueError:  # a closed stream
        on_terminal = False
    if whole or not on_terminal:
        return None
    return shutil.get_terminal_size().columns


def exit_status(transcript: Transcript, refused: bool) -> int:
    """1 when the stack refused something, else 3 for a bad file, else 6 for model errors.

    A policy hit is what a replay is run to find, so it outranks a quirk of the file: the
    readable part of a damaged transcript was replayed, and a refusal there is still one (the
    file's errors are on stderr either way).
    """
    if refused:
        return EXIT_REFUSED
    if transcript.errors:
        return EXIT_BAD_INPUT
    return EXIT_MODEL_ERRORS if transcript.model_errors else EXIT_OK

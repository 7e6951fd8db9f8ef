"""Built-in policies set from the ``loopware replay`` command line (``--deny``, ``--limit``...)."""

from __future__ import annotations

import argparse
import fnmatch
from collections.abc import Sequence
from typing import Final

from middleware import ApprovalGate, RepetitionDetector, ToolCallLimit, ToolPolicy
from pipeline import Gate

__all__ = ["POLICY_SUGGESTION", "add_policy_arguments", "policy_flags", "policy_middleware"]

POLICY_SUGGESTION: Final = (
    "try --deny PATTERN, --limit NAME=N, --total N, --repeat N or --approve-none PATTERN, "
    "or -m module:attr"
)
"""What replay suggests when it runs with no policy at all."""


def _limit(text: str) -> tuple[str, int]:
    name, sep, count = text.partition("=")
    if not sep or not name or not count.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=N (e.g. issue_refund=1), got {text!r}")
    return name, int(count)


def _count(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(text)


def add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the built-in policy options to the replay parser."""
    group = parser.add_argument_group(
        "built-in policies (outermost first, before any -m middleware)"
    )
    group.add_argument(
        "--deny",
        action="append",
        default=[],
        metavar="PATTERN",
        help="ToolPolicy: never offer or run tools matching PATTERN (fnmatch, repeatable)",
    )
    group.add_argument(
        "--allow",
        action="append",
        default=None,
        metavar="PATTERN",
        help="ToolPolicy: offer and run only tools matching PATTERN (repeatable)",
    )
    group.add_argument(
        "--approve-none",
        action="append",
        default=[],
        metavar="PATTERN",
        help="ApprovalGate: calls to tools matching PATTERN need approval, and it is refused "
        "(verdict rejected)",
    )
    group.add_argument(
        "--approve-all",
        action="append",
        default=[],
        metavar="PATTERN",
        help="ApprovalGate: calls to tools matching PATTERN need approval, and it is given "
        "(verdict approved: shows which calls would have waited for a human)",
    )
    group.add_argument(
        "--repeat",
        type=_count,
        default=None,
        metavar="N",
        help="RepetitionDetector: refuse, before it runs, a call made identically N times in "
        "the conversation (N >= 2)",
    )
    group.add_argument(
        "--window",
        type=_count,
        default=None,
        metavar="N",
        help="RepetitionDetector: also refuse an A-B-A-B alternation within the last N calls "
        "of a turn (N >= 4; implies --repeat 3 when --repeat is not given)",
    )
    group.add_argument(
        "--limit",
        action="append",
        type=_limit,
        default=[],
        metavar="NAME=N",
        help="ToolCallLimit: at most N calls of tool NAME per turn; the call that reaches the "
        "limit hides the tool, later ones are denied (repeatable)",
    )
    group.add_argument(
        "--total",
        type=_count,
        default=None,
        metavar="N",
        help="ToolCallLimit: at most N tool calls per turn in all",
    )


def policy_flags(args: argparse.Namespace) -> list[str]:
    """The policy options given, as they would be typed (for the report)."""
    flags = [f"--deny {p}" for p in args.deny]
    flags += [f"--allow {p}" for p in args.allow or ()]
    flags += [f"--approve-none {p}" for p in args.approve_none]
    flags += [f"--approve-all {p}" for p in args.approve_all]
    if args.repeat is not None:
        flags.append(f"--repeat {args.repeat}")
    if args.window is not None:
        flags.append(f"--window {args.window}")
    flags += [f"--limit {name}={n}" for name, n in args.limit]
    if args.total is not None:
        flags.append(f"--total {args.total}")
    return flags


def policy_middleware(args: argparse.Namespace) -> list[object]:
    """Build the built-in policies the options ask for, outermost first.

    Raises:
        InvalidMiddlewareConfigError: a value the policy refuses (``--repeat 1``...).
    """
    items: list[object] = []
    if args.deny or args.allow is not None:
        items.append(ToolPolicy(allow=args.allow, deny=args.deny))
    refused: Sequence[str] = args.approve_none
    if refused or args.approve_all:

        def approver(gate: Gate) -> bool:
            tool = str(gate.payload.get("tool", ""))
            return not any(fnmatch.fnmatchcase(tool, p) for p in refused)

        items.append(ApprovalGate([*refused, *args.approve_all], approver=approver))
    if args.repeat is not None or args.window is not None:
        threshold = 3 if args.repeat is None else args.repeat
        items.append(RepetitionDetector(threshold=threshold, window=args.window))
    if args.limit or args.total is not None:
        items.append(ToolCallLimit(dict(args.limit), total=args.total))
    return items

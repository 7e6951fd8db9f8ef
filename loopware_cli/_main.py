"""The ``loopware`` command: demo, run, replay, pipelines, gateway, worker, approve, console.

``main(argv)`` returns the exit status instead of exiting, so it can be called in-process; the
console script (``loopware = "loopware_cli._main:main"``) exits with it. Exit statuses are listed in
`EXIT_STATUS_HELP` and shown once, by ``loopware --help``.

Import time: ``import loopware_cli`` loads this module and the standard library's argparse only.
Each subcommand's module (and with it `pipeline`, `middleware`, pydantic, the replay engine) is
imported when that subcommand is parsed; ``loopware --help`` lists the subcommands from
`COMMANDS` without importing any of them, and ``--version`` reads the installed metadata only
when asked (``tests/test_import_laziness.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

if TYPE_CHECKING:
    from pipeline.errors import MissingExtraError

__all__ = [
    "COMMANDS",
    "EXIT_BAD_INPUT",
    "EXIT_BAD_TARGET",
    "EXIT_MISSING_EXTRA",
    "EXIT_MODEL_ERRORS",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "Command",
    "build_parser",
    "main",
    "missing_extra_line",
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
EXIT_MODEL_ERRORS: Final = 6
"""replay: the recorded model made errors (tool arguments that are not a JSON object)."""
EXIT_MISSING_EXTRA: Final = 7
"""The command needs an optional extra that is not installed (`MissingExtraError`)."""

EXIT_STATUS_HELP: Final = """\
exit status (every command):
  0  success; for replay: no recorded call was denied or rejected (each was
     allowed, approved, warned about, answered, invalid or failed), and every
     replayed turn completed
  1  run: the turn failed or was aborted (a policy nack, a provider error);
     replay: the stack denied or rejected at least one recorded call, or a
     replayed turn failed (a nack such as PolicyViolationError, or a middleware
     error); demo: the audit file cannot be written, the scripted turn did not
     complete, or the audit chain did not verify; audit verify: the chain does
     not verify; approve: the gate is not waiting; gateway: an upstream server
     cannot be started
  2  usage error: unknown option, missing argument (argparse), or a policy
     option value the policy refuses (--repeat 1)
  3  bad input file: replay's transcript is missing, unreadable, not UTF-8,
     invalid or truncated JSON, or has malformed messages (printed on stderr as
     FILE:LINE:COLUMN: CODE: messages[INDEX]: what is wrong; the readable part is
     still replayed and reported); audit, console: the log cannot be read; worker,
     gateway, approve, console: the configuration file or a value in it is unusable
  4  bad module:attr: the module cannot be imported, the attribute is missing, or
     it is not middleware or tools (replay, run) / not a TurnRunner
     (pipelines); a factory that needs arguments or raises counts too; gateway:
     --http on an address that is not loopback, without an [auth] table; console:
     --host that is not loopback, without --allow-remote
  5  run: the model cannot be used: its API key is not set or was refused, or the
     model string is not one loopware knows
  6  replay: the transcript is readable but the recorded model made errors (tool
     arguments that are not a JSON object): those calls were replayed, as sent,
     and are invalid (E_TRANSCRIPT_ARGS lines on stderr)
  7  any command: it needs an optional extra that is not installed; one line
     names it: loopware run needs the openai extra: pip install 'loopware[openai]'
When several apply, the first of 7, 4, 1, 3, 6 wins: a missing extra or a bad
target stops the command before anything runs, and a policy hit is what a
replay is for, so a damaged file (3) or model errors (6) never hide it."""

SUBCOMMAND_EPILOG: Final = "exit status: listed once, in `loopware --help`"
"""What a subcommand's ``--help`` ends with, instead of repeating the list."""

_DESCRIPTION: Final = "loopware: a typed framework for the tool-calling loop of LLM agents."


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # only for --version

    try:
        return version("loopware")
    except PackageNotFoundError:
        return "unknown (not installed)"


class _Version(argparse.Action):
    """``--version``: the installed version, read only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(f"loopware {_version()}")
        parser.exit()


def _configure_demo(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run a scripted support-agent turn (no network, no API keys) through ToolPolicy,\n"
        "RepetitionDetector, ToolCallLimit and an AuditLog written to a temporary SQLite\n"
        "file (or to --audit PATH, recreated on every run); the output says where. Each\n"
        "iteration is shown with the tools offered, every call, its result and the stack's\n"
        "decision, then a summary table. Colour is used on a terminal unless NO_COLOR is set."
    )
    parser.add_argument("--plain", action="store_true", help="no colour, even on a terminal")
    parser.add_argument("--audit", metavar="PATH", help="write the audit database to PATH")
    parser.set_defaults(handler=_run_demo)


def _configure_replay(parser: argparse.ArgumentParser) -> None:
    from ._replay import REPLAY_DESCRIPTION, add_replay_arguments, run_replay

    parser.description = REPLAY_DESCRIPTION
    add_replay_arguments(parser)
    parser.set_defaults(handler=run_replay)


def _configure_run(parser: argparse.ArgumentParser) -> None:
    from ._run_args import add_run_arguments

    add_run_arguments(parser)


def _configure_pipelines(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Print each stage of a TurnRunner (turn_input, dispatch_input, dispatch_output,\n"
        "turn_output) with its middleware names in execution order, outermost first.\n"
        "MODULE:ATTR names a TurnRunner or a zero-argument factory returning one; the\n"
        "current directory is importable."
    )
    parser.add_argument("target", metavar="MODULE:ATTR", help="the runner (or its factory)")
    parser.add_argument("--json", action="store_true", help="print the stages as JSON")
    parser.set_defaults(handler=_run_pipelines)


def _configure_gateway(parser: argparse.ArgumentParser) -> None:
    from ._gateway_server import add_gateway_arguments

    add_gateway_arguments(parser)


def _configure_worker(parser: argparse.ArgumentParser) -> None:
    from ._worker import WORKER_DESCRIPTION, add_worker_arguments, run_worker

    parser.description = WORKER_DESCRIPTION
    add_worker_arguments(parser)
    parser.set_defaults(handler=run_worker)


def _configure_audit(parser: argparse.ArgumentParser) -> None:
    from ._audit import add_audit_arguments

    add_audit_arguments(parser)


def _configure_console(parser: argparse.ArgumentParser) -> None:
    from ._console import add_console_arguments

    add_console_arguments(parser)


def _configure_approve(parser: argparse.ArgumentParser) -> None:
    from ._approve import APPROVE_DESCRIPTION, add_approve_arguments, run_approve

    parser.description = APPROVE_DESCRIPTION
    add_approve_arguments(parser)
    parser.set_defaults(handler=run_approve)


class Command(NamedTuple):
    """A subcommand: its one-line help (for ``loopware --help``) and how to build its parser."""

    help: str
    """The line ``loopware --help`` shows."""
    configure: Callable[[argparse.ArgumentParser], None]
    """Adds the description, the arguments and the handler (importing what the command uses)."""


COMMANDS: Final[dict[str, Command]] = {
    "demo": Command("run a scripted support-agent turn through a policy stack", _configure_demo),
    "replay": Command(
        "replay a recorded conversation through a middleware stack", _configure_replay
    ),
    "run": Command(
        "run one real turn against a real model through a middleware stack", _configure_run
    ),
    "pipelines": Command(
        "print the middleware order of every stage of a runner", _configure_pipelines
    ),
    "gateway": Command(
        "serve upstream MCP servers' tools through loopware's policies", _configure_gateway
    ),
    "worker": Command("run queued durable turns", _configure_worker),
    "approve": Command("settle a gate a durable turn waits on", _configure_approve),
    "audit": Command("verify an audit chain or print its rows", _configure_audit),
    "console": Command("browse the audit trail and answer approvals", _configure_console),
}
"""Every subcommand, in the order ``loopware --help`` lists them."""


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser of the ``loopware`` command (one subparser per subcommand).

    Args:
        commands: The subcommands to build whole (``None``: all of them). The others are
            listed by name and help only, enough for ``loopware --help``; `main` builds just
            the one its arguments name, so a command imports only what it uses.
    """
    parser = argparse.ArgumentParser(
        prog="loopware",
        description=_DESCRIPTION,
        epilog=EXIT_STATUS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    sub = parser.add_subparsers(title="commands")
    for name, command in COMMANDS.items():
        subparser = sub.add_parser(
            name,
            help=command.help,
            epilog=SUBCOMMAND_EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        subparser.set_defaults(command=name)
        if commands is None or name in commands:
            command.configure(subparser)
    return parser


def _command_in(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option."""
    for word in argv:
        if not word.startswith("-"):
            return word
    return None


def _error(command: str, message: str) -> None:
    print(f"loopware {command}: error: {message}", file=sys.stderr)


def _run_demo(args: argparse.Namespace) -> int:
    from ._demo import run_demo  # its tools and stack are built only when asked for

    return run_demo(sys.stdout, plain=args.plain, audit_path=args.audit)


def _run_pipelines(args: argparse.Namespace) -> int:
    import json

    from pipeline.errors import LoopError, MissingExtraError

    from ._resolve import resolve_runner

    try:
        runner = resolve_runner(args.target)
    except MissingExtraError:  # told once, by main(): exit 7
        raise
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


def missing_extra_line(command: str, error: MissingExtraError) -> str:
    """The one line a command prints for a missing extra (no traceback)."""
    who = f"loopware {command}" if command else "loopware"
    if error.extra is None:
        return f"{who}: error: {error.message}"
    return f"{who} needs the {error.extra} extra: pip install 'loopware[{error.extra}]'"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``loopware`` command with ``argv`` (default ``sys.argv[1:]``); return its status.

    Never exits the interpreter: argparse's own exits (``--help``, usage errors) become the
    returned status.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command_in(argv)
    parser = build_parser(() if command is None else (command,))
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
    except Exception as exc:
        missing = _missing_extra(exc)
        if missing is None:
            raise
        # the one place a missing extra is told, in every command
        print(missing_extra_line(getattr(args, "command", ""), missing), file=sys.stderr)
        return EXIT_MISSING_EXTRA


def _missing_extra(exc: Exception) -> MissingExtraError | None:
    """``exc`` when it is a `MissingExtraError` (whose module is loaded if one was raised)."""
    errors = sys.modules.get("pipeline.errors")
    if errors is None:
        return None
    missing: type[MissingExtraError] = errors.MissingExtraError
    return exc if isinstance(exc, missing) else None


if __name__ == "__main__":
    raise SystemExit(main())


main.__module__ = "loopware_cli"

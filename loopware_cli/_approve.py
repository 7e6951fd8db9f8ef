"""``loopware approve GATE_ID [--reject]``: settle a gate a durable turn waits on.

It sends the decision through the system database (``DurableClient.settle``); whichever worker
runs or later resumes the turn reads it there. ``--list`` prints the gates turns wait on now.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Final

from pipeline.durable import DEFAULT_QUEUE, DurableClient, GateNotWaitingError
from pipeline.errors import LoopError, MissingExtraError

from ._worker_config import read_worker_config

__all__ = ["add_approve_arguments", "run_approve"]

_EXIT_OK: Final = 0  # loopware_cli/_main.py EXIT_OK
_EXIT_REFUSED: Final = 1  # no turn waits on the gate
_EXIT_USAGE: Final = 2
_EXIT_BAD_INPUT: Final = 3

APPROVE_DESCRIPTION: Final = """\
Approve (or, with --reject, reject) the gate GATE_ID a durable turn waits on; the
worker running the turn, or the next one to resume it, continues. Name the system
database with --config (a worker's TOML file) or --db URL. --list prints the waiting
gates as JSON lines. --value JSON resolves a typed gate (Gate[T]) to that value; a value
its schema refuses rejects the gate. Exit status 1: no turn waits on GATE_ID."""


def add_approve_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``loopware approve``."""
    parser.add_argument("gate_id", nargs="?", metavar="GATE_ID", help="the gate to settle")
    parser.add_argument("--reject", action="store_true", help="reject instead of approving")
    parser.add_argument("--reason", default=None, help="why (shown to the model on --reject)")
    parser.add_argument(
        "--value",
        default=None,
        metavar="JSON",
        help="what the gate resolves to (JSON; default true), checked against its schema",
    )
    parser.add_argument("--list", action="store_true", help="print the gates turns wait on")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", metavar="FILE", help="a worker's TOML file")
    where.add_argument("--db", metavar="URL", help="the system database URL")
    parser.add_argument("--queue", default=None, help=f"the queue (default {DEFAULT_QUEUE})")


def run_approve(args: argparse.Namespace) -> int:
    """The ``loopware approve`` command."""
    if not args.list and not args.gate_id:
        print("loopware approve: error: give GATE_ID or --list", file=sys.stderr)
        return _EXIT_USAGE
    value = None
    if args.value is not None:
        if args.reject:
            print("loopware approve: error: --value approves; not with --reject", file=sys.stderr)
            return _EXIT_USAGE
        try:
            value = json.loads(args.value)
        except ValueError as exc:
            print(f"loopware approve: error: --value is not JSON: {exc}", file=sys.stderr)
            return _EXIT_USAGE
    try:
        if args.config is not None:
            config = read_worker_config(args.config)
            database, queue, app = config.system_database, config.queue, config.app_name
        else:
            database, queue, app = args.db, DEFAULT_QUEUE, "loopware"
        with DurableClient(database, queue=args.queue or queue, app_name=app) as client:
            if args.list:
                for gate in client.waiting_gates():
                    print(json.dumps(gate, default=str, sort_keys=True))
                return _EXIT_OK
            client.settle(args.gate_id, approve=not args.reject, reason=args.reason, value=value)
    except GateNotWaitingError as exc:
        print(f"loopware approve: {exc}", file=sys.stderr)
        return _EXIT_REFUSED
    except MissingExtraError:  # told once, by main(): exit 7
        raise
    except LoopError as exc:
        print(f"loopware approve: error: {exc}", file=sys.stderr)
        return _EXIT_BAD_INPUT
    print(f"{'rejected' if args.reject else 'approved'} {args.gate_id}")
    return _EXIT_OK

"""Counting a Python process's instructions under callgrind: the benchmarks' shared step.

Each ``*_instructions`` benchmark runs a scenario in a process of its own under
``valgrind --tool=callgrind`` (instructions, which no other load on the machine moves) and
reads the process's total from callgrind's output file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["callgrind_argv", "count_instructions", "read_total"]


def callgrind_argv(out: Path) -> list[str]:
    """The ``valgrind`` command line that writes its counts to ``out`` (the program follows)."""
    return ["valgrind", "-q", "--tool=callgrind", f"--callgrind-out-file={out}"]


def read_total(out: Path) -> int:
    """The total instructions callgrind wrote to ``out``."""
    found = re.search(r"^totals: (\d+)", out.read_text(), re.MULTILINE)
    if found is None:
        raise SystemExit(f"no totals in {out}")
    return int(found.group(1))


def count_instructions(args: Sequence[str], out: Path, tree: Path) -> int:
    """Instructions of ``python args...`` run in ``tree`` (first on ``PYTHONPATH``).

    The same process runs once uncounted first, so that modules changed since their bytecode
    was cached are compiled there and not inside the counted run (a benchmark that takes the
    difference of two counted runs would otherwise count the compilation in one of them).
    ``PYTHONHASHSEED`` is fixed: the same string hashes, the same count.
    """
    env = dict(os.environ, PYTHONHASHSEED="0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    program = [sys.executable, *args]
    subprocess.run(program, check=True, stdout=subprocess.DEVNULL, env=env, cwd=tree)
    argv = [*callgrind_argv(out), *program]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env, cwd=tree)
    return read_total(out)

"""How long ``import pipeline, middleware`` takes in a fresh interpreter.

Run::

    python -m bench.import_time                         # 15 fresh interpreters
    python -m bench.import_time --quick                 # 3, for a smoke test
    python -m bench.import_time --against /work/main    # paired with another source tree

Each run starts a new ``python`` (the one running this script, with the same ``sys.path``)
and times the import with ``time.perf_counter`` inside it, bytecode cached as for an installed
package (a warm-up run writes it under a temporary ``PYTHONPYCACHEPREFIX``, whatever
``PYTHONDONTWRITEBYTECODE`` says, so the source tree is left as it is). It reports which
optional parsers (Markdown, YAML, JSONPath, JSON5, ``regex``) the import loaded: none should be,
they load on first use. The median of the runs, wall-clock and CPU time
(``time.process_time``, less sensitive to a busy machine), is reported next to two references
timed on the same machine: ``import pydantic, asyncio`` (the floor when the import still loaded
pydantic; pydantic now loads with the first tool) and the modules outside loopware that the
import does load (`DEPENDENCIES`: ``asyncio`` and a few stdlib modules), the floor of the
import as it is. Runs of the imports alternate, so load hits them alike. ``--against DIR`` also
times the import from another source tree (the commit to compare with) in the same alternation
and reports the paired differences. Target: under 0.10 s. ``import loopware_cli`` and
``loopware --help`` (in process: the import, the parser, the help text) are timed too: the CLI
imports a command's modules when that command runs (``loopware_cli/_main.py``). For a
per-module breakdown: ``python -X importtime -c 'import pipeline, middleware'``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

TARGET_SECONDS = 0.10
OPTIONAL = ("markdown_it", "yaml", "jsonpath_ng", "json5", "regex")
DEPENDENCIES = "asyncio, dataclasses, datetime, hashlib, json, typing_extensions, unicodedata"
"""What ``import pipeline, middleware`` loads from outside loopware (docs/architecture.md)."""

_PROBE = """
import json, sys, time
wall, cpu = time.perf_counter(), time.process_time()
{statement}
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
loaded = [m for m in {optional!r} if m in sys.modules]
print(json.dumps({{"wall": wall, "cpu": cpu, "loaded": loaded}}))
"""


_HELP = (
    "import contextlib, io, loopware_cli\n"
    "with contextlib.redirect_stdout(io.StringIO()):\n"
    "    loopware_cli.main(['--help'])"
)
"""``loopware --help`` without the interpreter's start: import the CLI, build the parser, print."""

CLI_TARGET_SECONDS = 0.10
"""``import loopware_cli``: the CLI imports what a command needs when it runs."""


@dataclass
class Series:
    """The runs of one import from one source tree."""

    label: str
    modules: str
    path: str
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    loaded: set[str] = field(default_factory=set)
    statement: str = ""
    """What is timed (default ``import <modules>``)."""

    def run(self, pycache: str, record: bool = True) -> None:
        """Import in a fresh interpreter (bytecode cached under ``pycache``)."""
        env = dict(os.environ, PYTHONPATH=self.path)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
        statement = self.statement or f"import {self.modules}"
        code = _PROBE.format(statement=statement, optional=OPTIONAL)
        # Run from the cache directory: ``python -c`` puts the working directory first on
        # sys.path, which would shadow PYTHONPATH.
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True, text=True, check=True, env=env, cwd=pycache,
        ).stdout
        result = json.loads(out.strip().splitlines()[-1])
        if record:
            self.wall.append(float(result["wall"]))
            self.cpu.append(float(result["cpu"]))
            self.loaded.update(str(name) for name in result["loaded"])

    def line(self) -> str:
        """Medians (and minimums) of the wall-clock and CPU times."""
        return (
            f"{self.label:<40} wall median {statistics.median(self.wall):.3f} s "
            f"(min {min(self.wall):.3f})  CPU median {statistics.median(self.cpu):.3f} s "
            f"(min {min(self.cpu):.3f})"
        )


def main(argv: list[str] | None = None) -> int:
    """Measure, print and check that no optional parser is imported."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="3 runs (smoke test)")
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per import")
    parser.add_argument("--against", default=None, help="another source tree to compare with")
    options = parser.parse_args(argv)
    runs = 3 if options.quick else options.runs
    # Only the tree that holds ``pipeline`` (as --against gives): a longer PYTHONPATH costs
    # every import a few more lookups.
    spec = importlib.util.find_spec("pipeline")
    assert spec is not None
    assert spec.origin is not None
    here = os.path.dirname(os.path.dirname(spec.origin))

    series = [
        Series("import pydantic, asyncio", "pydantic, asyncio", here),
        Series("import asyncio, hashlib, ... (floor)", DEPENDENCIES, here),
        Series("import pipeline, middleware", "pipeline, middleware", here),
        Series("import loopware_cli", "loopware_cli", here),
        Series("loopware --help (in process)", "loopware_cli", here, statement=_HELP),
    ]
    if options.against:
        series.append(
            Series(f"  ... from {options.against}", "pipeline, middleware", options.against)
        )
    with tempfile.TemporaryDirectory(prefix="loopware-pycache-") as pycache:
        caches = [os.path.join(pycache, str(index)) for index in range(len(series))]
        for each, cache in zip(series, caches, strict=True):  # warm-up: writes the bytecode
            os.makedirs(cache)
            each.run(cache, record=False)
        for _ in range(runs):
            for each, cache in zip(series, caches, strict=True):
                each.run(cache)
    print(f"{runs} fresh interpreters each, alternating; target < {TARGET_SECONDS:.2f} s")
    for each in series:
        print(each.line())
    if options.against:
        ours, theirs = series[2], series[5]
        wall = statistics.median(a - b for a, b in zip(ours.wall, theirs.wall, strict=True))
        cpu = statistics.median(a - b for a, b in zip(ours.cpu, theirs.cpu, strict=True))
        print(f"paired difference (this tree minus the other): wall {wall:+.3f} s, "
              f"CPU {cpu:+.3f} s (medians)")
    loaded = series[2].loaded
    print(f"optional parsers loaded by the import: {sorted(loaded) or 'none'}")
    status = 0
    if loaded:
        print("FAIL: optional parsers must load on first use, not on import")
        status = 1
    cli = statistics.median(series[3].wall)
    print(f"import loopware_cli: median {cli:.3f} s (target < {CLI_TARGET_SECONDS:.2f} s)")
    return status


if __name__ == "__main__":
    raise SystemExit(main())

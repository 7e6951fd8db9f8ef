"""How long ``import pipeline, middleware`` takes in a fresh interpreter.

Run::

    python -m bench.import_time            # 15 fresh interpreters
    python -m bench.import_time --quick    # 3, for a smoke test

Each run starts a new ``python`` (the one running this script, with the same ``sys.path``)
and times the import with ``time.perf_counter`` inside it, bytecode cached as for an installed
package (a warm-up run writes it under a temporary ``PYTHONPYCACHEPREFIX``, whatever
``PYTHONDONTWRITEBYTECODE`` says, so the source tree is left as it is). It reports which
optional parsers (Markdown, YAML, JSONPath, JSON5, ``regex``) the import loaded: none should be,
they load on first use. The median of the runs is reported next to the time of
``import pydantic, asyncio`` (the floor those packages set on the same machine). Target
(issue 15): under 0.10 s. For a
per-module breakdown: ``python -X importtime -c 'import pipeline, middleware'``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

TARGET_SECONDS = 0.10
OPTIONAL = ("markdown_it", "yaml", "jsonpath_ng", "json5", "regex")

_PROBE = """
import json, sys, time
started = time.perf_counter()
import {modules}
seconds = time.perf_counter() - started
print(json.dumps({{"seconds": seconds, "loaded": [m for m in {optional!r} if m in sys.modules]}}))
"""


def run_once(modules: str, pycache: str) -> dict[str, object]:
    """Import ``modules`` in a fresh interpreter; return its seconds and optional modules."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = pycache
    code = _PROBE.format(modules=modules, optional=OPTIONAL)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def median_seconds(
    modules: str, runs: int, pycache: str
) -> tuple[float, list[float], set[str]]:
    """Return the median, every run's seconds and the optional modules any run loaded.

    One warm-up run first writes the bytecode under ``pycache``.
    """
    run_once(modules, pycache)
    seconds: list[float] = []
    loaded: set[str] = set()
    for _ in range(runs):
        result = run_once(modules, pycache)
        value = result["seconds"]
        assert isinstance(value, float)
        seconds.append(value)
        names = result["loaded"]
        assert isinstance(names, list)
        loaded.update(str(name) for name in names)
    return statistics.median(seconds), seconds, loaded


def main(argv: list[str] | None = None) -> int:
    """Measure, print and check that no optional parser is imported."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="3 runs (smoke test)")
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per import")
    options = parser.parse_args(argv)
    runs = 3 if options.quick else options.runs

    with tempfile.TemporaryDirectory(prefix="loopware-pycache-") as pycache:
        floor, _, _ = median_seconds("pydantic, asyncio", runs, pycache)
        median, every, loaded = median_seconds("pipeline, middleware", runs, pycache)
    print(f"import pydantic, asyncio     median {floor:.3f} s ({runs} fresh interpreters)")
    print(
        f"import pipeline, middleware  median {median:.3f} s "
        f"(min {min(every):.3f}, max {max(every):.3f}; target < {TARGET_SECONDS:.2f} s)"
    )
    print(f"optional parsers loaded by the import: {sorted(loaded) or 'none'}")
    if loaded:
        print("FAIL: optional parsers must load on first use, not on import")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

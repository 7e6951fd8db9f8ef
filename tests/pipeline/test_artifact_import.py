"""``import pipeline, middleware`` loads no optional parser; each loads on first use.

Run in fresh interpreters, so that modules this test session already imported do not count.
A behaviour test: the speed itself is measured by ``python -m bench.import_time``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

PARSERS = ("markdown_it", "yaml", "jsonpath_ng", "json5", "regex")
OPTIONAL = (*PARSERS, "middleware.transcripts")


def loaded_after(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter; return the optional parsers then imported."""
    report = f"print(json.dumps([m for m in {OPTIONAL!r} if m in sys.modules]))"
    probe = f"import json, sys\n{code}\n{report}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=env, check=True, timeout=120)
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_pipeline_and_middleware_loads_no_optional_parser() -> None:
    """Markdown, YAML, JSONPath, JSON5, regex and the replay engine stay out of sys.modules."""
    assert loaded_after("import pipeline, middleware") == []


def test_the_replay_engine_loads_when_first_named() -> None:
    """``from middleware.transcripts import replay`` loads the replay engine and nothing else
    optional."""
    assert loaded_after("from middleware.transcripts import replay") == ["middleware.transcripts"]


def test_each_parser_loads_when_its_query_first_runs() -> None:
    """A grep loads regex, a JSON query jsonpath-ng, a Markdown one markdown-it, and so on."""
    code = """
import pipeline.artifacts, pipeline.stores
store = pipeline.stores.MemorySpoolStore()
plain = pipeline.artifacts.SpooledArtifact(store.write("a", "x\\ny"))
assert plain.grep("y") == ["1:y"]
assert "regex" in sys.modules and "jsonpath_ng" not in sys.modules
doc = pipeline.artifacts.SpooledJsonArtifact(store.write("b", "{a: 1,}"))
assert doc.json_get("$.a") == [1] and doc.json_type() == "json5"
md = pipeline.artifacts.SpooledMarkdownArtifact(store.write("c", "---\\nt: 1\\n---\\n# Hi"))
assert md.md_frontmatter() == {"t": 1} and md.md_headings()[0]["text"] == "Hi"
"""
    assert loaded_after(code) == list(PARSERS)

"""Artifacts at scale: a 200 MB file-backed body queried by every tool.

The body is JSON Lines written to a `FileSpoolStore` in 1 MB chunks, so it is never a string
in memory. A fresh interpreter (so that nothing else this test session holds counts) forges the
query tools of `SpooledJsonArtifact` and `SpooledMarkdownArtifact` over it and calls every one
as the model would, through the forged tool's executor. It reports its peak RSS growth over
those calls and the size of each result: growth must stay under 64 MB and no result may pass
the cap (``max_result_bytes``, 32 KiB).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

LIMIT_MB = 64
SIZE_MB = 200

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, resource, sys

    from pipeline.artifacts import SpooledArtifact, SpooledJsonArtifact, SpooledMarkdownArtifact
    from pipeline.calls import ToolCall
    from pipeline.errors import LoopError
    from pipeline.stores import FileSpoolStore

    directory, size_mb = sys.argv[1], int(sys.argv[2])
    PAD = "x" * 1900

    def chunks():
        written, n = 0, 0
        while written < size_mb * 1024 * 1024:
            lines = []
            for _ in range(500):
                level = "ERROR" if n % 50_000 == 7 else "INFO"
                lines.append(json.dumps({"id": n, "role": "user" if n % 3 else "tool",
                                         "level": level, "pad": PAD}) + "\\n")
                n += 1
            chunk = "".join(lines)
            written += len(chunk)
            yield chunk

    reader = FileSpoolStore(directory).write_chunks("big", chunks())

    def peak_mb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    class Ctx:
        turn_id = "turn-1"
        def __init__(self, call):
            self.call = call
        def emit(self, event):
            pass
        def artifact_call_ids(self, cls):
            return [self.call.id] if isinstance(self.call.results, cls) else []
        def get_tool_call(self, call_id):
            return self.call if call_id == self.call.id else None

    ARGS = {
        "artifact_head": {"n": 1_000_000},
        "artifact_tail": {"n": 1_000_000},
        "artifact_grep": {"pattern": "ERROR"},
        "artifact_cat": {"start": 1000},
        "artifact_json_get": {"path": "$.id"},
        "artifact_json_filter": {"path": "$.role"},
        "artifact_json_pluck": {"path": "$.pad"},
        "artifact_json_slice": {"start": 10},
        "artifact_md_links": {"start_line": 0},
    }

    async def main():
        results = {}
        baseline = peak_mb()
        for cls in (SpooledJsonArtifact, SpooledMarkdownArtifact):
            artifact = cls(reader)
            call = ToolCall.completed(id="big", tool="fetch", args={}, results=artifact)
            ctx = Ctx(call)
            for tool in cls.forge_tools(ctx).all():
                if tool.name in results:
                    continue  # a base tool, already called through the JSON class
                arguments = {"call_id": "big", **ARGS.get(tool.name, {})}
                try:
                    text = await tool.bind(ctx)(arguments)
                    error = None
                except LoopError as exc:
                    text, error = exc.message, exc.code
                results[tool.name] = {
                    "bytes": len(text.encode("utf-8")), "error": error, "head": text[:300],
                    "tail": text[-300:],
                }
        growth = peak_mb() - baseline
        print(json.dumps({"growth_mb": growth, "size": reader.byte_length(),
                          "results": results}))

    asyncio.run(main())
    """
)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Run the 200 MB scenario once in a fresh interpreter; return its report."""
    directory: Path = tmp_path_factory.mktemp("big")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(directory), str(SIZE_MB)],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def results_of(report: dict[str, object]) -> dict[str, dict[str, object]]:
    results = report["results"]
    assert isinstance(results, dict)
    return results


def test_every_tool_was_called_on_a_200_mb_body(report: dict[str, object]) -> None:
    """The body is 200 MB and all 22 query tools (7 base, 7 JSON, 8 Markdown) answered."""
    size = report["size"]
    assert isinstance(size, int)
    assert size >= SIZE_MB * 1024 * 1024
    from pipeline.artifacts import SpooledJsonArtifact, SpooledMarkdownArtifact

    names = {m.name for m in SpooledJsonArtifact.all_tool_methods()}
    names |= {m.name for m in SpooledMarkdownArtifact.all_tool_methods()}
    assert set(results_of(report)) == names
    assert len(names) == 22


def test_peak_memory_grows_by_less_than_64_mb(report: dict[str, object]) -> None:
    """Every query streams: the process's peak RSS grows by less than 64 MB over all of them."""
    growth = report["growth_mb"]
    assert isinstance(growth, float)
    assert growth < LIMIT_MB, f"peak RSS grew by {growth:.1f} MB"


def test_no_result_passes_the_cap(report: dict[str, object]) -> None:
    """Every result, error text included, is at most 32 KiB."""
    for name, result in results_of(report).items():
        size = result["bytes"]
        assert isinstance(size, int), name
        assert 0 < size <= 32 * 1024, (name, size)


def test_long_results_say_how_to_read_on(report: dict[str, object]) -> None:
    """A capped result ends with a note naming the next range, offset or start line."""
    results = results_of(report)
    expected = {
        "artifact_head": "artifact_cat(start=",
        "artifact_tail": "artifact_cat(start=",
        "artifact_cat": "artifact_cat(start=",
        "artifact_json_get": 'artifact_json_get(path="$.id", offset=',
        "artifact_json_filter": 'artifact_json_filter(path="$.role", offset=',
        "artifact_json_pluck": 'artifact_json_pluck(path="$.pad", offset=',
        "artifact_json_slice": "artifact_json_slice(start=",
    }
    for name, advice in expected.items():
        tail = results[name]["tail"]
        assert isinstance(tail, str)
        assert "[output capped at 32,768 bytes" in tail, (name, tail)
        assert advice in tail, (name, tail)


def test_small_answers_are_exact(report: dict[str, object]) -> None:
    """The whole-body answers are right: the format, the record count, the matching lines."""
    results = results_of(report)
    assert results["artifact_json_type"]["head"] == "jsonl"
    count = results["artifact_line_count"]["head"]
    assert isinstance(count, str)
    assert results["artifact_json_length"]["head"] == str(int(count) - 1)  # the last is empty
    grep = results["artifact_grep"]["head"]
    assert isinstance(grep, str)
    assert grep.startswith('7:{"id": 7, ')


def test_markdown_queries_refuse_a_body_too_large_to_parse(report: dict[str, object]) -> None:
    """Markdown parsing is bounded: the query says so and points at grep and cat."""
    results = results_of(report)
    for name in ("artifact_md_headings", "artifact_md_text", "artifact_md_ast"):
        assert results[name]["error"] == "E_TOOL_DOWNSTREAM_ERROR"
        head = results[name]["head"]
        assert isinstance(head, str)
        assert "too large to parse as Markdown" in head
        assert "artifact_grep" in head

"""Every ``examples/NN_*.py`` runs: its ``main()`` finishes and prints something."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("[0-9][0-9]_*.py"))
PRIVATE_IMPORT = re.compile(r"^\s*(from|import)\s+(pipeline|middleware)\.(_\w+)", re.MULTILINE)


def test_examples_exist() -> None:
    """The examples directory holds at least the tools and turn-loop examples."""
    names = [path.name for path in EXAMPLES]
    assert "01_tools.py" in names
    assert "02_turn_loop.py" in names


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_example_main_runs(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Importing the example and calling main() succeeds and prints output."""
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    main = getattr(module, "main", None)
    assert callable(main), f"{path.name} has no main()"
    outcome = main()
    if inspect.isawaitable(outcome):
        asyncio.run(_await(outcome))
    assert capsys.readouterr().out.strip(), f"{path.name} printed nothing"


async def _await(awaitable: object) -> None:
    assert inspect.isawaitable(awaitable)
    await awaitable


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_example_uses_public_api_only(path: Path) -> None:
    """Examples import loopware's public modules only, never a private ``_module``."""
    source = path.read_text(encoding="utf-8")
    assert PRIVATE_IMPORT.search(source) is None

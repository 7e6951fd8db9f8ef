"""Writes the site's reference pages at build time (the mkdocs-gen-files plugin runs it).

Nothing here is written by hand, so nothing here can drift from the code:

* one page per public module (``reference/<module>.md``), rendered by mkdocstrings from the
  module's docstrings; the public modules are found the way ``tests/test_exports.py`` finds
  them, by walking the packages on disk;
* the event table, appended to ``reference/events.md``, read from ``pipeline.events``;
* the error-code tables, appended to ``reference/errors.md``, read from every `LoopError`
  subclass a public module exports.

``tests/test_docs.py`` imports this file to check the tables and the site's navigation.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from collections.abc import Iterator

from pipeline import events
from pipeline.errors import LoopError

ROOTS = ("pipeline", "middleware", "loopware_cli")
"""The packages whose public modules get a reference page."""

FAMILIES = ("ConfigurationError", "ToolError", "PipelineError", "GateError", "ModelError")
"""The error families a caller catches (``pipeline.errors``' docstring draws the tree)."""


def public_modules() -> list[str]:
    """Every public module under the roots: no part of its dotted path starts with ``_``."""
    found: list[str] = []

    def walk(name: str) -> None:
        found.append(name)
        module = importlib.import_module(name)
        for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
            if not info.name.startswith("_"):
                walk(f"{name}.{info.name}")

    for root in ROOTS:
        walk(root)
    return found


def module_page(module: str) -> str:
    """The Markdown of one module's reference page: its title and the mkdocstrings directive."""
    return f"# `{module}`\n\n::: {module}\n"


def _first_line(obj: object) -> str:
    """The first sentence line of an object's docstring, made safe for a table cell."""
    doc = inspect.getdoc(obj) or ""
    return doc.split("\n\n", 1)[0].replace("\n", " ").replace("|", "\\|").strip()


def _link(module: str, name: str) -> str:
    """A link to a name's entry on its module's reference page (resolved by mkdocs-autorefs)."""
    return f"[`{name}`][{module}.{name}]"


def events_table() -> str:
    """The events `pipeline.events` exports, each with its own fields and when it is emitted.

    They are listed in the order they are defined, which is about the order a turn emits them.
    """
    base = {field.name for field in dataclasses.fields(events.Event)}
    exported = {getattr(events, name) for name in events.__all__}

    def in_order(cls: type[events.Event]) -> Iterator[type[events.Event]]:
        for sub in cls.__subclasses__():  # in the order the classes were created
            yield sub
            yield from in_order(sub)

    classes = [cls for cls in in_order(events.Event) if cls in exported]
    lines = ["| event | fields (besides `turn_id`, `timestamp`) | when |", "|---|---|---|"]
    for cls in classes:
        own = [f"`{field.name}`" for field in dataclasses.fields(cls) if field.name not in base]
        link = _link("pipeline.events", cls.__name__)
        lines.append(f"| {link} | {', '.join(own) or '-'} | {_first_line(cls)} |")
    return "\n".join(lines) + "\n"


def _errors() -> Iterator[tuple[str, type[LoopError]]]:
    """Every `LoopError` subclass a public module exports, with that module, sorted by code."""
    found: dict[type[LoopError], str] = {}
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) and issubclass(value, LoopError):
                found[value] = module_name
    yield from sorted(((m, c) for c, m in found.items()), key=lambda mc: mc[1].code)


def _parents(cls: type[LoopError]) -> str:
    """What an error is: its direct loopware base, and the family above it when that differs."""
    bases = [klass for klass in cls.__mro__[1:] if issubclass(klass, LoopError)]
    if not bases:
        return "-"
    family = next((klass for klass in bases if klass.__name__ in FAMILIES), None)
    named = f"`{bases[0].__name__}`"
    return named if family in (None, bases[0]) else f"{named} (a `{family.__name__}`)"


def errors_table() -> str:
    """One row per error class: its code, status, fatal flag, family and meaning."""
    lines = [
        "| code | class | status | fatal | is a | what it means |",
        "|---|---|---|---|---|---|",
    ]
    for module, cls in _errors():
        fatal = "yes" if cls.fatal else "no"
        lines.append(
            f"| `{cls.code}` | {_link(module, cls.__name__)} | {cls.status} | {fatal} "
            f"| {_parents(cls)} | {_first_line(cls)} |"
        )
    return "\n".join(lines) + "\n"


def _generate() -> None:
    """Writes the pages into the build (only when mkdocs-gen-files runs this file)."""
    import mkdocs_gen_files

    modules = public_modules()
    for module in modules:
        with mkdocs_gen_files.open(f"reference/{module}.md", "w") as page:
            page.write(module_page(module))
    with mkdocs_gen_files.open("reference/events.md", "a") as page:
        page.write("\n" + events_table())
    with mkdocs_gen_files.open("reference/errors.md", "a") as page:
        page.write("\n" + errors_table())


if __name__ in {"__main__", "<run_path>"}:
    _generate()

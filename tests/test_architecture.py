"""The architecture rules of docs/architecture.md, checked on the source.

* No module reads another object's underscore attributes: ``x._field`` is allowed only on
  ``self``/``cls`` or inside the class that defines ``_field`` (another instance of it).
* No import loop among the modules of a package: every import counts, lazy ones inside
  functions too, except those under ``if TYPE_CHECKING:``.
* Counting the ``TYPE_CHECKING`` imports too, no cycle (strongly connected component) of a
  package's modules is larger than `MAX_TYPED_CYCLE`: the layers of the docs hold for types too.
* The packages depend one way: ``loopware_cli`` -> ``middleware`` -> ``pipeline``, each through
  the public names of the one below.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipeline", "middleware", "loopware_cli")


def sources(package: str, root: Path = ROOT) -> list[Path]:
    return sorted((root / package).rglob("*.py"))


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


ALL_SOURCES = [p for package in PACKAGES for p in sources(package)]


# -- private reach-ins -------------------------------------------------------------------------
def _owned(cls: ast.ClassDef) -> set[str]:
    """Underscore names a class defines: slots, methods, class attributes, ``self.x =``."""
    names: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                    if target.id == "__slots__" and isinstance(node.value, (ast.Tuple, ast.List)):
                        names.update(
                            e.value
                            for e in node.value.elts
                            if isinstance(e, ast.Constant) and isinstance(e.value, str)
                        )
    return names


def reach_ins(path: Path) -> list[str]:
    """Every ``x._name`` in ``path`` that reads another object's private attribute."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []

    def visit(node: ast.AST, owned: set[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, owned | _owned(child))
                continue
            if (
                isinstance(child, ast.Attribute)
                and child.attr.startswith("_")
                and not child.attr.startswith("__")
                and not (isinstance(child.value, ast.Name) and child.value.id in ("self", "cls"))
                and child.attr not in owned
            ):
                found.append(f"{path.relative_to(ROOT)}:{child.lineno}: {ast.unparse(child)}")
            visit(child, owned)

    visit(tree, set())
    return found


@pytest.mark.parametrize("path", ALL_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_reads_another_objects_private_attributes(path: Path) -> None:
    """Objects talk through public names; only a class touches its own underscore fields."""
    assert reach_ins(path) == []


def test_the_reach_in_check_catches_a_reach_in(tmp_path: Path) -> None:
    """The check is not vacuous: a read of another object's private field is reported."""
    bad = ROOT / "tests" / "_reach_in_sample.py"
    bad.write_text(
        "class A:\n    def f(self, b):\n        return b._secret + self._own\n",
        encoding="utf-8",
    )
    try:
        assert [line.split(": ", 1)[1] for line in reach_ins(bad)] == ["b._secret"]
    finally:
        bad.unlink()


# -- import loops ----------------------------------------------------------------------------
def _runtime_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import that can run (lazy ones in functions too), except under TYPE_CHECKING."""

    def walk(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                yield from (x for n in child.orelse for x in walk_one(n))
                continue
            yield from walk_one(child)

    def walk_one(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        else:
            yield from walk(node)

    yield from walk(tree)


def _all_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import in the module: lazy ones and those under ``if TYPE_CHECKING:`` too."""
    return (node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))


def import_graph(
    package: str, *, type_checking: bool = False, root: Path = ROOT
) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (exact targets, lazy imports too).

    With ``type_checking``, imports under ``if TYPE_CHECKING:`` count as well.
    """
    modules = {module_name(p, root): p for p in sources(package, root)}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    imports = _all_imports if type_checking else _runtime_imports
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        here = name if is_package else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in imports(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = here.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                targets = [
                    f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source
                    for a in node.names
                ]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_loop_among_a_packages_modules(package: str) -> None:
    """Module imports form a DAG (lazy imports included); only ``TYPE_CHECKING`` may close one."""
    assert cycles(import_graph(package)) == []


def test_the_loop_check_finds_a_loop() -> None:
    """The cycle finder is not vacuous."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# -- cycles of types -------------------------------------------------------------------------
MAX_TYPED_CYCLE = 6
"""The largest cycle allowed among a package's modules, ``TYPE_CHECKING`` imports counted.

It is the knot of ``pipeline``'s tools and the values they make (docs/architecture.md, "The
layers"): a `Tool`'s output may be a `SpooledArtifact`, whose ``forge_tools`` returns a
`ToolRegistry` of `Tool` s, so ``_tool``, ``_registry`` and ``artifacts._artifact`` name each
other, and with them every module on a path between them (``_tool_checks``, ``_events``,
``calls._toolcall``). Every other cycle is a pair: a context and the context it creates, the turn
and its dispatch loop, a middleware set and the decorators that register into it."""


def oversized_cycles(graph: dict[str, set[str]], limit: int) -> list[list[str]]:
    """The cycles of ``graph`` with more than ``limit`` modules."""
    return [cycle for cycle in cycles(graph) if len(cycle) > limit]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_large_cycle_among_a_packages_modules_type_checking_imports_included(
    package: str,
) -> None:
    """Counting ``TYPE_CHECKING`` imports, no cycle is larger than `MAX_TYPED_CYCLE` modules.

    A type-only import is a dependency all the same: values sit below the machinery that uses
    them, and a context never appears in a cycle with a value.
    """
    assert oversized_cycles(import_graph(package, type_checking=True), MAX_TYPED_CYCLE) == []


def test_the_typed_cycle_check_counts_type_checking_imports_and_finds_a_large_cycle(
    tmp_path: Path,
) -> None:
    """The check is not vacuous: a loop closed under TYPE_CHECKING is seen, one too large fails."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "a.py").write_text("from . import b\n", encoding="utf-8")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n",
        encoding="utf-8",
    )
    assert cycles(import_graph("pkg", root=tmp_path)) == []
    assert cycles(import_graph("pkg", type_checking=True, root=tmp_path)) == [["pkg.a", "pkg.b"]]

    ring = [f"m{i}" for i in range(MAX_TYPED_CYCLE + 1)]
    graph = {name: {ring[(i + 1) % len(ring)]} for i, name in enumerate(ring)}
    assert oversized_cycles(graph, MAX_TYPED_CYCLE) == [sorted(ring)]
    graph[ring[-1]] = set()  # opened: no cycle at all
    assert oversized_cycles(graph, MAX_TYPED_CYCLE) == []


# -- package direction -----------------------------------------------------------------------
def absolute_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [("pipeline", ("middleware", "loopware_cli")), ("middleware", ("loopware_cli",))],
)
def test_lower_packages_never_import_higher_ones(package: str, forbidden: tuple[str, ...]) -> None:
    """The dependency points one way: pipeline <- middleware <- loopware_cli."""
    bad = [
        (str(path.relative_to(ROOT)), module)
        for path in sources(package)
        for module in absolute_imports(path)
        if module.split(".")[0] in forbidden
    ]
    assert bad == []


@pytest.mark.parametrize("path", sources("loopware_cli"), ids=lambda p: p.name)
def test_the_command_line_uses_public_modules_only(path: Path) -> None:
    """`loopware_cli` imports `pipeline` and `middleware` through public modules only."""
    bad = [
        module
        for module in absolute_imports(path)
        if module.split(".")[0] in ("pipeline", "middleware")
        and any(part.startswith("_") for part in module.split(".")[1:])
    ]
    assert bad == []

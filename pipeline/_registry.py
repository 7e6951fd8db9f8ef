"""`ToolRegistry`: a name-keyed, insertion-ordered collection of tools with hidden names.

It does not retry, rate-limit, authorise, cache or deduplicate: everything else is middleware.

Merge precedence (`ToolRegistry.merge`): registries are read left to right, each in insertion
order. When an incoming tool's name is already taken, the **incoming** tool's own
``on_collision`` decides; the existing tool's policy is never consulted:

======================  =======================  =======================================
incoming on_collision   merge-level on_collision  result
======================  =======================  =======================================
``"replace"``           any                      incoming wins, at the existing position
``"keep"``              any                      existing wins
``"throw"``             ``"replace"``            incoming wins, at the existing position
``"throw"``             ``"keep"``               existing wins
``"throw"``             ``"throw"``              `ToolAlreadyRegisteredError`
======================  =======================  =======================================

A hidden mark follows the tool that survives.

Admission checks (`ToolRegistry.restrict`) survive every operation: a copy keeps them, and a
merged registry keeps the checks of every input and holds only the tools that pass all of them.
A refused incoming tool is skipped before the precedence table applies (it takes part in no
clash), so ``ctx.tools = ToolRegistry.merge([ctx.tools, other])`` cannot bring a denied tool
back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from ._tool import ON_COLLISION_VALUES, OnCollision, Tool
from .errors import InvalidToolError, ToolAlreadyRegisteredError

if TYPE_CHECKING:
    from .models._tool_defs import ToolDescription

__all__ = ["AckSource", "ToolRegistry", "ToolView"]

AnyTool = Tool[Any]


class AckSource(Protocol):
    """Anything that can run a handler on ack (a `DispatchContext`)."""

    def on_ack(self, handler: Callable[[], None]) -> Callable[[], None]:
        """Run ``handler`` at ack; return a function that unsubscribes it."""
        ...


class ToolView:
    """A turn's tools at one moment, read-only: what rendering results needs of them.

    `ToolRegistry.view` makes one; it is a `ToolLookup` (``get``, ``get_visible``) and never
    changes, so a `ModelRequest` can carry it without carrying the live registry.
    """

    __slots__ = ("_hidden", "_tools", "definitions")

    def __init__(
        self,
        tools: dict[str, AnyTool],
        hidden: frozenset[str],
        definitions: tuple[ToolDescription, ...],
    ) -> None:
        """Hold the tools by name, the hidden names and what the model is offered."""
        self._tools = tools
        self._hidden = hidden
        self.definitions = definitions
        """The definitions of the visible tools, in order (`ToolRegistry.definitions`)."""

    def __repr__(self) -> str:
        """List the names, the hidden ones marked."""
        return f"ToolView({[n + ('*' if n in self._hidden else '') for n in self._tools]!r})"

    def get(self, name: str) -> AnyTool | None:
        """The tool named ``name``, hidden or not, or None."""
        return self._tools.get(name)

    def get_visible(self, name: str) -> AnyTool | None:
        """The tool named ``name`` if it was offered to the model, else None."""
        return None if name in self._hidden else self._tools.get(name)


def _not_a_tool(value: object, where: str) -> InvalidToolError:
    return InvalidToolError(f"{where} must be a Tool, not {type(value).__name__}", field="tools")


class ToolRegistry:
    """A name-keyed, insertion-ordered collection of tools with a hidden-name set.

    Hidden tools are not offered to the model (`visible`) and a turn refuses calls to them
    (`get_visible`); `get` still finds them, for middleware that unhides or inspects.
    Iterating yields the tools in insertion order; ``name in registry`` tests a name (a `Tool`
    is also accepted: true when that very tool is registered).
    """

    __slots__ = ("_admit", "_ephemeral", "_hidden", "_offered", "_tools", "_view")

    _tools: dict[str, AnyTool]
    _hidden: set[str]
    _ephemeral: int
    _admit: tuple[Callable[[AnyTool], bool], ...]
    _offered: tuple[ToolDescription, ...] | None
    _view: ToolView | None

    def __init__(self, tools: Iterable[AnyTool] | ToolRegistry = ()) -> None:
        """Build a registry from tools, or copy another registry (tools, hidden marks, checks).

        Copying a registry is a dict and a set copy: a turn does it once from the baseline.

        Raises:
            ToolAlreadyRegisteredError: two tools share a name (``tool_name`` names it).
            InvalidToolError: an item is not a `Tool`.
        """
        if isinstance(tools, ToolRegistry):
            self._tools = tools._tools.copy()
            self._hidden = tools._hidden.copy()
            self._ephemeral = tools._ephemeral
            self._admit = tools._admit
            self._offered = tools._offered  # same tools, same marks: the same definitions
            self._view = tools._view
            return
        self._tools = {}
        self._hidden = set()
        self._ephemeral = 0
        self._admit = ()
        self._changed()
        for item in tools:
            self.register(item)

    def __repr__(self) -> str:
        """Return ``ToolRegistry([names...], hidden=[names...])``."""
        hidden = f", hidden={sorted(self._hidden)!r}" if self._hidden else ""
        return f"ToolRegistry({list(self._tools)!r}{hidden})"

    def register(self, tool: AnyTool, *, overwrite: bool = False) -> bool:
        """Add ``tool``; with ``overwrite=True`` replace a same-named tool in its position.

        ``tool.on_collision`` is ignored here (it is for `merge`). A hidden mark on the name
        stays when the tool is replaced. Returns False, adding nothing, when an admission
        check installed with `restrict` refuses the tool; True otherwise.

        Raises:
            ToolAlreadyRegisteredError: the name is taken and ``overwrite`` is False.
            InvalidToolError: ``tool`` is not a `Tool`.
        """
        if not isinstance(tool, Tool):
            raise _not_a_tool(tool, "a registered tool")
        name = tool.name
        existing = self._tools.get(name)
        if existing is not None and not overwrite:
            raise ToolAlreadyRegisteredError(
                f"a tool named {name!r} is already registered", tool_name=name
            )
        for admit in self._admit:
            if not admit(tool):
                return False
        if existing is not None:
            self._ephemeral -= existing.ephemeral
        self._changed()
        self._tools[name] = tool
        self._ephemeral += tool.ephemeral
        return True

    def restrict(self, admit: Callable[[AnyTool], bool]) -> list[AnyTool]:
        """Admit from now on only tools for which ``admit(tool)`` is true.

        Registered tools that fail are removed (and returned); later `register` calls that
        fail are refused. Checks accumulate, are copied with the registry and kept by `merge`,
        so a policy applied to a turn's registry also holds for tools forged or added later in
        the turn, at no cost per iteration. ``admit`` may record why it refused.
        """
        self._admit = (*self._admit, admit)
        refused = [tool for tool in self._tools.values() if not admit(tool)]
        for tool in refused:
            self.unregister(tool.name)
        return refused

    def unregister(self, name: str) -> None:
        """Remove the tool named ``name`` and its hidden mark; unknown names are a no-op."""
        removed = self._tools.pop(name, None)
        if removed is not None:
            self._changed()
            self._ephemeral -= removed.ephemeral
            self._hidden.discard(name)

    def get(self, name: str) -> AnyTool | None:
        """Return the tool named ``name`` (hidden or not), or None."""
        return self._tools.get(name)

    def get_visible(self, name: str) -> AnyTool | None:
        """Return the tool named ``name`` if it is offered to the model (not hidden), else None.

        This is how a call is looked up: a hidden tool is not callable. Names match exactly (no
        case folding or Unicode normalisation), so a look-alike never reaches a hidden tool.
        """
        if name in self._hidden:
            return None
        return self._tools.get(name)

    def is_hidden(self, name: str) -> bool:
        """Return whether ``name`` is registered and hidden."""
        return name in self._hidden

    def has(self, name: str) -> bool:
        """Return whether a tool named ``name`` is registered (hidden or not)."""
        return name in self._tools

    def __contains__(self, item: object) -> bool:
        """Return whether ``item`` (a name, or a `Tool`) is registered."""
        if isinstance(item, Tool):
            return self._tools.get(item.name) is item
        return isinstance(item, str) and item in self._tools

    def __len__(self) -> int:
        """Return the number of registered tools, hidden ones included."""
        return len(self._tools)

    def __iter__(self) -> Iterator[AnyTool]:
        """Iterate over the tools in insertion order (over a snapshot)."""
        return iter(list(self._tools.values()))

    def all(self) -> list[AnyTool]:
        """Return a fresh list of every tool in insertion order."""
        return list(self._tools.values())

    def visible(self) -> list[AnyTool]:
        """Return a fresh list of the tools offered to the model (not hidden), in order."""
        if not self._hidden:
            return list(self._tools.values())
        hidden = self._hidden
        return [tool for name, tool in self._tools.items() if name not in hidden]

    def definitions(self) -> tuple[ToolDescription, ...]:
        """The definitions of the visible tools, in order: what the model is offered.

        Kept until the registry changes (a register, unregister, hide, unhide or prune), so
        an executor asking every iteration builds it once per change, not once per iteration.
        """
        offered = self._offered
        if offered is None:
            offered = self._offered = tuple(tool.describe() for tool in self.visible())
        return offered

    def view(self) -> ToolView:
        """A read-only view of the tools as they are now (what a `ModelRequest` carries).

        Kept until the registry changes, like `definitions`.
        """
        view = self._view
        if view is None:
            view = self._view = ToolView(
                self._tools.copy(), frozenset(self._hidden), self.definitions()
            )
        return view

    def _changed(self) -> None:
        self._offered = None
        self._view = None

    def hidden(self) -> list[AnyTool]:
        """Return a fresh list of the hidden tools, in insertion order."""
        hidden = self._hidden
        if not hidden:
            return []
        return [tool for name, tool in self._tools.items() if name in hidden]

    def hide(self, *names: str) -> None:
        """Hide the named tools: no longer offered, and no longer callable (see `get_visible`).

        Names that are not registered are ignored.
        """
        tools = self._tools
        self._hidden.update(name for name in names if name in tools)
        self._changed()

    def unhide(self, *names: str) -> None:
        """Offer the named tools to the model again; unknown names are ignored."""
        self._hidden.difference_update(names)
        self._changed()

    def clear_hidden(self) -> None:
        """Unhide every tool."""
        self._hidden.clear()
        self._changed()

    def prune_ephemeral(self) -> None:
        """Drop every ephemeral tool (and its hidden mark); order kept, idempotent."""
        if not self._ephemeral:
            return
        self._tools = {name: tool for name, tool in self._tools.items() if not tool.ephemeral}
        self._hidden.intersection_update(self._tools)
        self._ephemeral = 0
        self._changed()

    def bind_context(self, ctx: AckSource) -> Callable[[], None]:
        """Prune ephemeral tools when ``ctx`` acks (never on nack); return the unsubscribe."""
        return ctx.on_ack(self.prune_ephemeral)

    @classmethod
    def merge(
        cls, registries: Iterable[ToolRegistry], *, on_collision: OnCollision = "throw"
    ) -> ToolRegistry:
        """Return a new registry holding the tools of ``registries``; inputs are not changed.

        See the module docs for the precedence table. The result keeps the admission checks
        (`restrict`) of every input, in first-seen order, and leaves out any tool that fails
        one of them; later `register` calls on it are checked the same way.

        Raises:
            InvalidToolError: ``on_collision`` is not ``"throw"``, ``"replace"`` or ``"keep"``
                (``field == "on_collision"``), or an item is not a `ToolRegistry`.
            ToolAlreadyRegisteredError: a clash resolved to throw (``tool_name`` names it).
        """
        if on_collision not in ON_COLLISION_VALUES:
            raise InvalidToolError(
                f"merge on_collision must be 'throw', 'replace' or 'keep', not {on_collision!r}",
                field="on_collision",
            )
        inputs = list(registries)
        admit: tuple[Callable[[AnyTool], bool], ...] = ()
        for registry in inputs:
            if not isinstance(registry, ToolRegistry):
                raise InvalidToolError(
                    f"merge takes ToolRegistry instances, not {type(registry).__name__}",
                    field="registries",
                )
            admit += tuple(check for check in registry._admit if check not in admit)
        tools: dict[str, AnyTool] = {}
        hidden: set[str] = set()
        for registry in inputs:
            marks = registry._hidden
            # checks the input already enforced held for its tools when they were registered
            foreign = tuple(check for check in admit if check not in registry._admit)
            for name, incoming in registry._tools.items():
                if foreign and not all(check(incoming) for check in foreign):
                    continue
                if name in tools:
                    policy = incoming.on_collision
                    if policy == "throw":
                        policy = on_collision
                    if policy == "keep":
                        continue
                    if policy == "throw":
                        raise ToolAlreadyRegisteredError(
                            f"merge: a tool named {name!r} is already registered", tool_name=name
                        )
                tools[name] = incoming
                if name in marks:
                    hidden.add(name)
                else:
                    hidden.discard(name)
        merged = cls()
        merged._tools = tools
        merged._hidden = hidden
        merged._ephemeral = sum(tool.ephemeral for tool in tools.values())
        merged._admit = admit
        return merged

    @staticmethod
    def is_tool_registry(value: object) -> TypeGuard[ToolRegistry]:
        """Return whether ``value`` is a `ToolRegistry`."""
        return isinstance(value, ToolRegistry)


ToolRegistry.__module__ = "pipeline"

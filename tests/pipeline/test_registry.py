"""ToolRegistry: registration, hidden names, ephemeral pruning and merge precedence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from pipeline import Stash, Tool, ToolRegistry
from pipeline.errors import InvalidToolError, ToolAlreadyRegisteredError
from pipeline.testing import make_dispatch_context


class NoArgs(BaseModel):
    pass


def _handler(args: NoArgs, ctx: Any, meta: Stash) -> str:
    return "ok"


def make(name: str, **options: Any) -> Tool[NoArgs]:
    return Tool(
        name=name, description=f"The {name} tool.", input_schema=NoArgs, handler=_handler, **options
    )


def names(tools: list[Tool[Any]]) -> list[str]:
    return [t.name for t in tools]


class FakeAckContext:
    """Anything with ``on_ack``: runs subscribed handlers when ``ack()`` is called."""

    def __init__(self) -> None:
        self.handlers: list[Callable[[], None]] = []

    def on_ack(self, handler: Callable[[], None]) -> Callable[[], None]:
        self.handlers.append(handler)

        def unsubscribe() -> None:
            if handler in self.handlers:
                self.handlers.remove(handler)

        return unsubscribe

    def ack(self) -> None:
        for handler in list(self.handlers):
            handler()

    def nack(self) -> None:
        """A nack runs no ack handler."""


# --- construction and registration ---------------------------------------------------------


def test_constructor_keeps_insertion_order() -> None:
    """Tools come back in the order they were given."""
    registry = ToolRegistry([make("b"), make("a"), make("c")])
    assert names(registry.all()) == ["b", "a", "c"]
    assert [t.name for t in registry] == ["b", "a", "c"]
    assert len(registry) == 3


def test_constructor_rejects_duplicate_names() -> None:
    """Two tools with one name raise ToolAlreadyRegisteredError naming it."""
    with pytest.raises(ToolAlreadyRegisteredError) as info:
        ToolRegistry([make("a"), make("a")])
    assert info.value.code == "E_TOOL_ALREADY_REGISTERED"
    assert info.value.tool_name == "a"


def test_constructor_rejects_non_tools() -> None:
    """Items that are not tools raise InvalidToolError."""
    with pytest.raises(InvalidToolError) as info:
        ToolRegistry([make("a"), "b"])  # type: ignore[list-item]
    assert info.value.code == "E_INVALID_INITIAL_TOOL_VALUE"


def test_register_rejects_a_taken_name_without_overwrite() -> None:
    """register() on a taken name raises unless overwrite=True."""
    registry = ToolRegistry([make("a")])
    with pytest.raises(ToolAlreadyRegisteredError) as info:
        registry.register(make("a"))
    assert info.value.code == "E_TOOL_ALREADY_REGISTERED"
    assert info.value.tool_name == "a"


def test_register_ignores_the_tool_on_collision_policy() -> None:
    """A tool's own on_collision does not let register() replace (it is for merge only)."""
    registry = ToolRegistry([make("a")])
    with pytest.raises(ToolAlreadyRegisteredError) as info:
        registry.register(make("a", on_collision="replace"))
    assert info.value.code == "E_TOOL_ALREADY_REGISTERED"
    keep = make("a", on_collision="keep")
    registry.register(keep, overwrite=True)
    assert registry.get("a") is keep


def test_overwrite_keeps_the_original_position() -> None:
    """Replacing a tool keeps it where the replaced one was."""
    registry = ToolRegistry([make("a"), make("b"), make("c")])
    newer = make("b", trusted=True)
    registry.register(newer, overwrite=True)
    assert names(registry.all()) == ["a", "b", "c"]
    assert registry.get("b") is newer


def test_register_rejects_non_tools() -> None:
    """register() with something that is not a Tool raises InvalidToolError."""
    with pytest.raises(InvalidToolError) as info:
        ToolRegistry().register("a")  # type: ignore[arg-type]
    assert info.value.code == "E_INVALID_INITIAL_TOOL_VALUE"


def test_unregister_removes_and_ignores_unknown_names() -> None:
    """unregister() drops a tool; an unknown name is a no-op."""
    registry = ToolRegistry([make("a"), make("b")])
    registry.unregister("a")
    registry.unregister("nope")
    assert names(registry.all()) == ["b"]
    assert not registry.has("a")


def test_unregister_clears_the_hidden_mark() -> None:
    """A tool registered again after unregister() is visible."""
    registry = ToolRegistry([make("a")])
    registry.hide("a")
    registry.unregister("a")
    registry.register(make("a"))
    assert names(registry.visible()) == ["a"]
    assert registry.hidden() == []


def test_lookup_methods() -> None:
    """get, has and ``in`` find tools by name (hidden ones too)."""
    a = make("a")
    registry = ToolRegistry([a])
    registry.hide("a")
    assert registry.get("a") is a
    assert registry.get("b") is None
    assert registry.has("a")
    assert not registry.has("b")
    assert "a" in registry
    assert "b" not in registry
    assert a in registry
    assert make("a") not in registry
    assert 3 not in registry


def test_all_returns_a_fresh_list() -> None:
    """Mutating what all(), visible() or hidden() returned changes nothing."""
    registry = ToolRegistry([make("a"), make("b")])
    registry.hide("b")
    for listing in (registry.all(), registry.visible(), registry.hidden()):
        listing.clear()
    assert names(registry.all()) == ["a", "b"]
    assert names(registry.visible()) == ["a"]
    assert names(registry.hidden()) == ["b"]
    assert registry.all() is not registry.all()


def test_iteration_survives_mutation() -> None:
    """Unregistering while iterating does not break the iteration."""
    registry = ToolRegistry([make("a"), make("b")])
    seen = []
    for t in registry:
        seen.append(t.name)
        registry.unregister(t.name)
    assert seen == ["a", "b"]
    assert len(registry) == 0


# --- hidden names --------------------------------------------------------------------------


def test_hide_and_unhide() -> None:
    """Hidden tools leave visible() but stay registered; unhide and clear_hidden undo it."""
    registry = ToolRegistry([make("a"), make("b"), make("c")])
    registry.hide("a", "c")
    assert names(registry.visible()) == ["b"]
    assert names(registry.hidden()) == ["a", "c"]
    assert len(registry) == 3
    registry.unhide("a", "zzz")
    assert names(registry.visible()) == ["a", "b"]
    registry.clear_hidden()
    assert names(registry.visible()) == ["a", "b", "c"]
    assert registry.hidden() == []


def test_hiding_an_unregistered_name_is_a_no_op() -> None:
    """Hiding a name that is not registered does not hide a tool registered later."""
    registry = ToolRegistry()
    registry.hide("later")
    registry.register(make("later"))
    assert names(registry.visible()) == ["later"]


def test_overwrite_keeps_a_hidden_mark() -> None:
    """Replacing a hidden tool by register(overwrite=True) keeps the name hidden."""
    registry = ToolRegistry([make("a")])
    registry.hide("a")
    registry.register(make("a"), overwrite=True)
    assert names(registry.hidden()) == ["a"]


# --- copies ------------------------------------------------------------------------------


def test_copy_from_a_registry_is_independent() -> None:
    """ToolRegistry(other) copies tools and hidden marks; later changes do not leak."""
    baseline = ToolRegistry([make("a"), make("b")])
    baseline.hide("b")
    turn = ToolRegistry(baseline)
    assert names(turn.all()) == ["a", "b"]
    assert names(turn.hidden()) == ["b"]
    turn.register(make("c"))
    turn.unhide("b")
    turn.unregister("a")
    assert names(baseline.all()) == ["a", "b"]
    assert names(baseline.hidden()) == ["b"]


# --- ephemeral tools ---------------------------------------------------------------------


def test_prune_ephemeral_drops_only_ephemeral_tools_in_order() -> None:
    """prune_ephemeral() removes ephemeral tools and their marks; it is idempotent."""
    registry = ToolRegistry(
        [make("a"), make("e1", ephemeral=True), make("b"), make("e2", ephemeral=True)]
    )
    registry.hide("e1", "b")
    registry.prune_ephemeral()
    assert names(registry.all()) == ["a", "b"]
    assert names(registry.hidden()) == ["b"]
    registry.prune_ephemeral()
    assert names(registry.all()) == ["a", "b"]
    registry.register(make("e1"))
    assert names(registry.visible()) == ["a", "e1"]  # the pruned tool's mark went with it


def test_prune_sees_ephemeral_tools_added_by_overwrite() -> None:
    """An ephemeral tool that replaced a lasting one is pruned; the reverse is kept."""
    registry = ToolRegistry([make("a"), make("b", ephemeral=True)])
    registry.register(make("a", ephemeral=True), overwrite=True)
    registry.register(make("b"), overwrite=True)
    registry.prune_ephemeral()
    assert names(registry.all()) == ["b"]


def test_bind_context_prunes_on_ack_only() -> None:
    """Ephemeral tools survive a nack and are pruned when the context acks."""
    registry = ToolRegistry([make("a"), make("e", ephemeral=True)])
    ctx = FakeAckContext()
    registry.bind_context(ctx)
    ctx.nack()
    assert names(registry.all()) == ["a", "e"]
    ctx.ack()
    assert names(registry.all()) == ["a"]


def test_unsubscribe_before_ack_keeps_ephemeral_tools() -> None:
    """Calling the returned unsubscribe before ack stops the pruning."""
    registry = ToolRegistry([make("e", ephemeral=True)])
    ctx = FakeAckContext()
    unsubscribe = registry.bind_context(ctx)
    unsubscribe()
    ctx.ack()
    assert names(registry.all()) == ["e"]


def test_bind_context_works_with_a_real_dispatch_context() -> None:
    """A DispatchContext's ack prunes the bound registry's ephemeral tools."""
    registry = ToolRegistry([make("a"), make("e", ephemeral=True)])
    ctx = make_dispatch_context(tools=registry)
    registry.bind_context(ctx)
    ctx.ack()
    assert names(registry.all()) == ["a"]


# --- merge -------------------------------------------------------------------------------

MERGE_TABLE = [
    # (incoming policy, merge-level policy, expected outcome)
    ("replace", "replace", "incoming"),
    ("replace", "keep", "incoming"),
    ("replace", "throw", "incoming"),
    ("keep", "replace", "existing"),
    ("keep", "keep", "existing"),
    ("keep", "throw", "existing"),
    ("throw", "replace", "incoming"),
    ("throw", "keep", "existing"),
    ("throw", "throw", "raise"),
]


@pytest.mark.parametrize(
    ("incoming_policy", "merge_policy", "outcome"),
    MERGE_TABLE,
    ids=[f"incoming-{i}-merge-{m}" for i, m, _ in MERGE_TABLE],
)
def test_merge_precedence_table(incoming_policy: Any, merge_policy: Any, outcome: str) -> None:
    """On a clash the incoming tool's policy decides; its ``throw`` defers to the merge's."""
    existing = make("x", on_collision="replace")  # the existing tool's policy is never consulted
    incoming = make("x", on_collision=incoming_policy)
    left = ToolRegistry([make("first"), existing, make("last")])
    right = ToolRegistry([incoming])
    if outcome == "raise":
        with pytest.raises(ToolAlreadyRegisteredError) as info:
            ToolRegistry.merge([left, right], on_collision=merge_policy)
        assert info.value.code == "E_TOOL_ALREADY_REGISTERED"
        assert info.value.tool_name == "x"
        return
    merged = ToolRegistry.merge([left, right], on_collision=merge_policy)
    assert names(merged.all()) == ["first", "x", "last"]
    assert merged.get("x") is (incoming if outcome == "incoming" else existing)


def test_merge_does_not_mutate_its_inputs() -> None:
    """The inputs keep their tools and hidden marks; the result is a new registry."""
    left = ToolRegistry([make("a")])
    left.hide("a")
    right = ToolRegistry([make("a", on_collision="replace"), make("b")])
    merged = ToolRegistry.merge([left, right])
    merged.register(make("c"))
    assert names(left.all()) == ["a"]
    assert names(left.hidden()) == ["a"]
    assert names(right.all()) == ["a", "b"]
    assert merged is not left
    assert merged is not right


def test_merge_hidden_mark_follows_the_survivor() -> None:
    """A replaced tool takes the incoming registry's mark; a kept tool keeps its own."""
    left = ToolRegistry([make("r"), make("k")])
    left.hide("r", "k")
    right = ToolRegistry([make("r", on_collision="replace"), make("k", on_collision="keep")])
    merged = ToolRegistry.merge([left, right])
    assert names(merged.visible()) == ["r"]
    assert names(merged.hidden()) == ["k"]
    hidden_incoming = ToolRegistry([make("v", on_collision="replace")])
    hidden_incoming.hide("v")
    merged = ToolRegistry.merge([ToolRegistry([make("v")]), hidden_incoming])
    assert names(merged.hidden()) == ["v"]


def test_merge_of_nothing_is_empty() -> None:
    """Merging no registries gives an empty registry."""
    assert len(ToolRegistry.merge([])) == 0


def test_merge_rejects_a_bad_policy() -> None:
    """An unknown merge-level on_collision raises InvalidToolError naming it."""
    with pytest.raises(InvalidToolError) as info:
        ToolRegistry.merge([], on_collision="merge")  # type: ignore[arg-type]
    assert info.value.code == "E_INVALID_INITIAL_TOOL_VALUE"
    assert info.value.field == "on_collision"


def test_merge_rejects_non_registries() -> None:
    """Items that are not registries raise InvalidToolError."""
    with pytest.raises(InvalidToolError) as info:
        ToolRegistry.merge([[make("a")]])  # type: ignore[list-item]
    assert info.value.code == "E_INVALID_INITIAL_TOOL_VALUE"


def test_merged_registry_prunes_its_ephemeral_tools() -> None:
    """Ephemeral tools that came in through merge are pruned like any other."""
    merged = ToolRegistry.merge(
        [ToolRegistry([make("a")]), ToolRegistry([make("e", ephemeral=True)])]
    )
    merged.prune_ephemeral()
    assert names(merged.all()) == ["a"]


def test_is_tool_registry_and_repr() -> None:
    """is_tool_registry() tells registries apart; the repr lists names and hidden names."""
    registry = ToolRegistry([make("a"), make("b")])
    registry.hide("b")
    assert ToolRegistry.is_tool_registry(registry)
    assert not ToolRegistry.is_tool_registry([make("a")])
    assert repr(registry) == "ToolRegistry(['a', 'b'], hidden=['b'])"
    assert ToolRegistry.__module__ == "pipeline"


# --- merge, property-based against a reference model ---------------------------------------

POLICIES = ("throw", "replace", "keep")
Spec = list[list[tuple[str, str, bool]]]

_TOOL_CACHE: dict[tuple[str, str, int, int], Tool[NoArgs]] = {}


def _spec_tool(name: str, policy: str, registry_index: int, item_index: int) -> Tool[NoArgs]:
    key = (name, policy, registry_index, item_index)
    if key not in _TOOL_CACHE:
        _TOOL_CACHE[key] = make(name, on_collision=policy)
    return _TOOL_CACHE[key]


def reference_merge(
    spec: Spec, level: str
) -> tuple[list[str], dict[str, tuple[int, int]], set[str]] | str:
    """The documented precedence, written as plainly as possible."""
    order: list[str] = []
    owner: dict[str, tuple[int, int]] = {}
    hidden: set[str] = set()
    for r, registry in enumerate(spec):
        for i, (name, policy, is_hidden) in enumerate(registry):
            if name in owner:
                effective = level if policy == "throw" else policy
                if effective == "throw":
                    return name
                if effective == "keep":
                    continue
            else:
                order.append(name)
            owner[name] = (r, i)
            if is_hidden:
                hidden.add(name)
            else:
                hidden.discard(name)
    return order, owner, hidden


registry_specs = st.lists(
    st.lists(
        st.tuples(st.sampled_from("abcde"), st.sampled_from(POLICIES), st.booleans()),
        max_size=5,
        unique_by=lambda item: item[0],
    ),
    max_size=4,
)


@settings(max_examples=150, deadline=None)
@given(spec=registry_specs, level=st.sampled_from(POLICIES))
def test_merge_matches_the_reference_model(spec: Spec, level: Any) -> None:
    """For random registries and policies, merge agrees with the precedence table."""
    registries = []
    for r, items in enumerate(spec):
        registry = ToolRegistry(
            [_spec_tool(name, policy, r, i) for i, (name, policy, _) in enumerate(items)]
        )
        registry.hide(*[name for name, _, is_hidden in items if is_hidden])
        registries.append(registry)
    before = [(names(reg.all()), names(reg.hidden())) for reg in registries]
    expected = reference_merge(spec, level)
    if isinstance(expected, str):
        with pytest.raises(ToolAlreadyRegisteredError) as info:
            ToolRegistry.merge(registries, on_collision=level)
        assert info.value.tool_name == expected
    else:
        order, owner, hidden = expected
        merged = ToolRegistry.merge(registries, on_collision=level)
        assert names(merged.all()) == order
        for name, (r, i) in owner.items():
            assert merged.get(name) is _spec_tool(name, spec[r][i][1], r, i)
        assert set(names(merged.hidden())) == hidden
        assert names(merged.visible()) == [n for n in order if n not in hidden]
    assert [(names(reg.all()), names(reg.hidden())) for reg in registries] == before


OPS = ("register", "overwrite", "unregister", "hide", "unhide", "clear_hidden", "prune")


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(OPS), st.sampled_from("abcd"), st.booleans())))
def test_a_turn_copy_never_changes_its_baseline(ops: list[tuple[str, str, bool]]) -> None:
    """Whatever a turn does to its copy, the baseline registry is unchanged."""
    baseline = ToolRegistry([make("a"), make("b", ephemeral=True), make("c")])
    baseline.hide("c")
    snapshot = (baseline.all(), baseline.visible(), baseline.hidden())
    turn = ToolRegistry(baseline)
    for op, name, flag in ops:
        if op == "register" and not turn.has(name):
            turn.register(make(name, ephemeral=flag))
        elif op == "overwrite":
            turn.register(make(name, ephemeral=flag), overwrite=True)
        elif op == "unregister":
            turn.unregister(name)
        elif op == "hide":
            turn.hide(name)
        elif op == "unhide":
            turn.unhide(name)
        elif op == "clear_hidden":
            turn.clear_hidden()
        elif op == "prune":
            turn.prune_ephemeral()
        assert set(names(turn.hidden())) <= set(names(turn.all()))
        assert not any(t.ephemeral for t in turn.all()) or op != "prune"
    assert (baseline.all(), baseline.visible(), baseline.hidden()) == snapshot


def test_definitions_follow_every_change_to_what_is_offered() -> None:
    """The offered definitions are rebuilt after each change and shared while none happens."""
    registry = ToolRegistry([make("a"), make("b")])

    def names() -> list[str]:
        return [d["name"] for d in registry.definitions()]

    first = registry.definitions()
    assert registry.definitions() is first  # no change: the same tuple
    assert names() == ["a", "b"]
    registry.hide("a")
    assert names() == ["b"]
    registry.unhide("a")
    assert names() == ["a", "b"]
    registry.register(make("c", ephemeral=True))
    assert names() == ["a", "b", "c"]
    registry.hide("b")
    copy = ToolRegistry(registry)
    assert [d["name"] for d in copy.definitions()] == ["a", "c"]
    registry.clear_hidden()
    assert names() == ["a", "b", "c"]
    assert [d["name"] for d in copy.definitions()] == ["a", "c"]  # the copy is independent
    registry.prune_ephemeral()
    assert names() == ["a", "b"]
    registry.unregister("a")
    assert names() == ["b"]
    registry.restrict(lambda tool: tool.name != "b")
    assert names() == []

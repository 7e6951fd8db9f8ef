from __future__ import annotations

import enum
import json
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import Stash, StashKey
from pipeline.calls import ToolCall
from pipeline.errors import InvalidStashValueError, LoopError


def _path_of(error: InvalidStashValueError) -> object:
    """The ``path`` context attribute (set through LoopError's context keywords)."""
    return vars(error)["path"]


# --- copy semantics -------------------------------------------------------------------------


def test_set_stores_a_copy() -> None:
    """Mutating a value after set never changes the store."""
    stash = Stash()
    value: dict[str, Any] = {"items": [1, 2], "meta": {"n": 1}}
    stash.set("a", value)
    value["items"].append(3)
    value["meta"]["n"] = 99
    value["new"] = True
    assert stash.get("a") == {"items": [1, 2], "meta": {"n": 1}}


def test_get_returns_a_copy() -> None:
    """Mutating what get returned never changes the store."""
    stash = Stash({"a": {"items": [1, 2], "meta": {"n": 1}}})
    got = stash.get("a")
    got["items"].append(3)
    got["meta"]["n"] = 99
    inner = stash.get("a.items")
    inner.append(4)
    assert stash.get("a") == {"items": [1, 2], "meta": {"n": 1}}


def test_seed_is_deep_copied() -> None:
    """The seed mapping is copied: later changes to it are not seen by the stash."""
    seed: dict[str, Any] = {"limits": {"calls": [1, 2]}}
    stash = Stash(seed)
    seed["limits"]["calls"].append(3)
    seed["other"] = 1
    assert stash.all() == {"limits": {"calls": [1, 2]}}


def test_all_is_a_deep_copy() -> None:
    """Mutating the dict returned by all() never changes the store."""
    stash = Stash({"a": {"b": [1]}})
    snapshot = stash.all()
    snapshot["a"]["b"].append(2)
    snapshot["x"] = 1
    assert stash.all() == {"a": {"b": [1]}}


def test_get_copies_only_the_touched_subtree() -> None:
    """Reading one subtree returns fresh containers each time, equal to the stored data."""
    stash = Stash({"a": {"b": [1]}, "c": [2]})
    first, second = stash.get("a"), stash.get("a")
    assert first == second == {"b": [1]}
    assert first is not second
    assert first["b"] is not second["b"]


def test_typed_key_default_is_copied() -> None:
    """A container default handed out by stash[key] is a fresh copy each time."""
    key = StashKey[list[int]]("xs", default=[])
    stash = Stash()
    stash[key].append(1)
    assert stash[key] == []
    assert key.default == []


def test_update_passes_a_copy_and_stores_a_copy() -> None:
    """update's fn may mutate what it receives; the returned value is not the stored one."""
    stash = Stash({"xs": [1]})

    def append(xs: list[int]) -> list[int]:
        xs.append(2)
        return xs

    new = stash.update("xs", append)
    assert new == [1, 2]
    new.append(3)
    assert stash.get("xs") == [1, 2]


# --- falsy values and has --------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 0.0, "", False, None, [], {}], ids=repr)
def test_has_is_true_for_stored_falsy_values(value: Any) -> None:
    """has() reports falsy values (and None) as present; absent paths as absent."""
    stash = Stash()
    stash.set("a.b", value)
    assert stash.has("a.b")
    assert stash.get("a.b", default="absent") == value
    assert not stash.has("a.c")
    assert stash.get("a.c", default="absent") == "absent"


def test_get_without_default_returns_none_for_absent() -> None:
    """get() of an absent path returns None, and a path through a scalar is absent."""
    stash = Stash({"a": 1})
    assert stash.get("missing") is None
    assert stash.get("a.b") is None
    assert not stash.has("a.b")


# --- bad paths and bad values ----------------------------------------------------------------


@pytest.mark.parametrize("path", ["", ".", "a.", ".a", "a..b"], ids=repr)
@pytest.mark.parametrize("method", ["get", "set", "has", "delete", "update"])
def test_malformed_paths_raise(method: str, path: str) -> None:
    """Every path-taking method rejects an empty path or an empty segment."""
    stash = Stash({"a": {"b": 1}})
    calls: dict[str, Callable[[], object]] = {
        "get": lambda: stash.get(path),
        "set": lambda: stash.set(path, 1),
        "has": lambda: stash.has(path),
        "delete": lambda: stash.delete(path),
        "update": lambda: stash.update(path, lambda v: v),
    }
    with pytest.raises(InvalidStashValueError) as info:
        calls[method]()
    assert info.value.code == "E_INVALID_STASH_VALUE"
    assert _path_of(info.value) == path
    assert stash.all() == {"a": {"b": 1}}


def test_non_str_path_raises() -> None:
    """A path that is not a string is malformed."""
    with pytest.raises(InvalidStashValueError) as info:
        Stash().get(1)  # type: ignore[arg-type]
    assert info.value.code == "E_INVALID_STASH_VALUE"


def test_malformed_key_path_raises_at_construction() -> None:
    """A StashKey with a malformed path fails when it is built, not when it is used."""
    with pytest.raises(InvalidStashValueError) as info:
        StashKey[int]("a..b")
    assert info.value.code == "E_INVALID_STASH_VALUE"


@pytest.mark.parametrize(
    ("seed", "path", "where"),
    [
        ({"a": 1}, "a.b", "'a'"),
        ({"a": {"b": "text"}}, "a.b.c.d", "'a.b'"),
        ({"a": [1, 2]}, "a.x", "'a'"),
        ({"a": [1, 2]}, "a.2", "'a'"),
        ({"a": [{"b": None}]}, "a.0.b.c", "'a.0.b'"),
    ],
    ids=["through int", "through str", "list by name", "list out of range", "through None"],
)
def test_setting_through_a_non_container_raises(
    seed: dict[str, Any], path: str, where: str
) -> None:
    """set() through a scalar, or a bad index into a list, raises naming the path; no change."""
    stash = Stash(seed)
    with pytest.raises(InvalidStashValueError) as info:
        stash.set(path, 1)
    assert info.value.code == "E_INVALID_STASH_VALUE"
    assert _path_of(info.value) == path
    assert path in str(info.value)
    assert where in str(info.value)
    assert stash.all() == seed


class _Opaque:
    pass


BAD_VALUES: list[tuple[str, Any, str]] = [
    ("object", _Opaque(), "x"),
    ("set", {1, 2}, "x"),
    ("frozenset", frozenset(), "x"),
    ("bytes", b"raw", "x"),
    ("datetime", datetime(2024, 1, 1), "x"),
    ("int keys", {1: "a"}, "x"),
    ("nested bad value", {"a": [1, {"b": {3}}]}, "x.a.1.b"),
    ("nested int key", {"a": {"ok": 1, 2: "no"}}, "x.a"),
    ("bad in tuple", (1, b"x"), "x.1"),
]


@pytest.mark.parametrize(
    ("value", "where"),
    [case[1:] for case in BAD_VALUES],
    ids=[case[0] for case in BAD_VALUES],
)
def test_values_that_are_not_plain_data_raise(value: Any, where: str) -> None:
    """set() rejects non-plain data with the offending path, and leaves the store unchanged."""
    stash = Stash({"keep": 1})
    with pytest.raises(InvalidStashValueError) as info:
        stash.set("x", value)
    assert info.value.code == "E_INVALID_STASH_VALUE"
    assert _path_of(info.value) == where
    assert repr(where) in str(info.value)
    assert stash.all() == {"keep": 1}
    assert not stash.has("x")


def test_circular_value_raises() -> None:
    """A value containing itself is not plain data."""
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(InvalidStashValueError, match="circular"):
        Stash().set("x", looped)


def _nested(depth: int) -> list[Any]:
    """``depth`` lists, one inside the other, around a single leaf."""
    value: list[Any] = [0]
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [600, 5_000], ids=["readable-by-recursion", "very-deep"])
def test_values_nested_too_deeply_are_refused_with_a_typed_error(depth: int) -> None:
    """Values deeper than 128 levels raise InvalidStashValueError (never RecursionError)."""
    stash = Stash({"keep": 1})
    with pytest.raises(InvalidStashValueError, match="nested deeper than 128"):
        stash.set("x", {"deep": _nested(depth)})
    with pytest.raises(InvalidStashValueError, match="nested deeper than 128"):
        Stash({"deep": _nested(depth)})
    assert stash.all() == {"keep": 1}


def test_everything_a_stash_accepts_can_be_read_back() -> None:
    """The deepest value and the longest path accepted are still copied out by get and all."""
    stash = Stash()
    path = ".".join(["p"] * 128)
    stash.set(path, _nested(128))
    assert stash.get(path) == _nested(128)
    assert len(stash.keys()) == 1
    assert stash.all()["p"]["p"] is not None
    with pytest.raises(InvalidStashValueError, match="129 segments"):
        stash.set(path + ".p", 1)


def test_update_rejects_bad_new_value_and_keeps_the_old() -> None:
    """update() validates fn's result like set(); on failure the old value stays."""
    stash = Stash({"n": 1})
    with pytest.raises(InvalidStashValueError) as info:
        stash.update("n", lambda n: {n})
    assert info.value.code == "E_INVALID_STASH_VALUE"
    assert stash.get("n") == 1


def test_update_leaves_store_unchanged_when_fn_raises() -> None:
    """If fn raises, its exception propagates and nothing is stored."""
    stash = Stash()

    def boom(_: Any) -> int:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        stash.update("a.b", boom, default=0)
    assert stash.all() == {}


def test_invalid_stash_value_error_shape() -> None:
    """The error is a fatal LoopError with the stable code."""
    with pytest.raises(InvalidStashValueError) as info:
        Stash().set("x", object())
    assert isinstance(info.value, LoopError)
    assert info.value.fatal is True
    assert str(info.value).startswith("E_INVALID_STASH_VALUE: ")


# --- seeds -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "seed", [[("a", 1)], "a=1", 3, {"a", "b"}], ids=["pairs", "text", "int", "set"]
)
def test_non_mapping_seed_raises(seed: Any) -> None:
    """A seed that is not a mapping raises InvalidStashValueError."""
    with pytest.raises(InvalidStashValueError) as info:
        Stash(seed)
    assert info.value.code == "E_INVALID_STASH_VALUE"


def test_seed_with_bad_values_raises_naming_the_path() -> None:
    """A seed holding non-plain data or non-str keys fails with the path."""
    with pytest.raises(InvalidStashValueError) as info:
        Stash({"a": {"b": object()}})
    assert _path_of(info.value) == "a.b"
    with pytest.raises(InvalidStashValueError) as info:
        Stash({1: "x"})  # type: ignore[dict-item]
    assert info.value.code == "E_INVALID_STASH_VALUE"


def test_any_mapping_seed_and_value_become_plain_dicts() -> None:
    """Mappings are stored as plain dicts and tuples as lists; scalar subclasses by value."""

    class Mode(enum.StrEnum):
        FAST = "fast"

    class Level(enum.IntEnum):
        HIGH = 3

    stash = Stash(MappingProxyType({"m": OrderedDict(a=(1, 2))}))
    stash.set("e", [Mode.FAST, Level.HIGH])
    assert stash.all() == {"m": {"a": [1, 2]}, "e": ["fast", 3]}
    assert type(stash.get("m")) is dict
    assert type(stash.get("m.a")) is list
    assert [type(v) for v in stash.get("e")] == [str, int]


# --- paths and lists -------------------------------------------------------------------------


def test_set_creates_intermediate_dicts() -> None:
    """set() creates every missing intermediate dict."""
    stash = Stash()
    stash.set("a.b.c", 1)
    stash.set("a.b.d", 2)
    assert stash.all() == {"a": {"b": {"c": 1, "d": 2}}}


def test_digit_segments_index_lists() -> None:
    """A digit segment indexes a list for get, set, has and delete."""
    stash = Stash({"decisions": [{"tool": "a"}, {"tool": "b"}]})
    assert stash.get("decisions.1.tool") == "b"
    assert stash.has("decisions.0")
    assert not stash.has("decisions.2")
    assert not stash.has("decisions.x")
    stash.set("decisions.0.tool", "z")
    assert stash.get("decisions.0") == {"tool": "z"}
    stash.set("decisions.1", 7)
    assert stash.get("decisions") == [{"tool": "z"}, 7]


def test_digit_segments_are_plain_keys_in_dicts() -> None:
    """In a dict, a digit segment is an ordinary string key (created on set)."""
    stash = Stash()
    stash.set("by_id.42.name", "x")
    assert stash.all() == {"by_id": {"42": {"name": "x"}}}
    assert stash.get("by_id.42.name") == "x"


# --- keys, delete ----------------------------------------------------------------------------


def test_keys_lists_leaves_in_insertion_order() -> None:
    """keys() gives leaf paths in insertion order, list items by index, skipping empties."""
    stash = Stash()
    stash.set("z", 1)
    stash.set("a.y", None)
    stash.set("a.x", [10, {"k": False}])
    stash.set("empty_dict", {})
    stash.set("empty_list", [])
    stash.set("nested.empty", {"deeper": {}})
    stash.set("b", "")
    assert stash.keys() == ["z", "a.y", "a.x.0", "a.x.1.k", "b"]
    leaves = stash.keys()
    assert all(stash.has(path) for path in leaves)


def test_keys_of_an_empty_stash() -> None:
    """An empty stash has no keys and an empty snapshot."""
    stash = Stash()
    assert stash.keys() == []
    assert stash.all() == {}


def test_delete_reports_whether_something_was_removed() -> None:
    """delete() returns True when it removed a value (even a falsy one), False otherwise."""
    stash = Stash({"a": {"b": 0, "c": None}, "xs": [1, 2, 3]})
    assert stash.delete("a.b") is True
    assert stash.delete("a.b") is False
    assert stash.delete("a.c") is True
    assert stash.delete("missing.path") is False
    assert stash.delete("a.b.c") is False
    assert stash.delete("xs.1") is True
    assert stash.delete("xs.5") is False
    assert stash.all() == {"a": {}, "xs": [1, 3]}


# --- update ----------------------------------------------------------------------------------


def test_update_counts_from_a_default() -> None:
    """update() reads the default when absent and returns and stores fn's result."""
    stash = Stash()
    assert stash.update("counts.search", lambda n: n + 1, default=0) == 1
    assert stash.update("counts.search", lambda n: n + 1, default=0) == 2
    assert stash.get("counts.search") == 2


def test_update_sees_stored_falsy_value_not_default() -> None:
    """A stored 0 or None is the current value; the default is used only when absent."""
    stash = Stash({"n": 0, "z": None})
    assert stash.update("n", lambda n: n + 5, default=100) == 5
    assert stash.update("z", lambda z: z is None, default="x") is True


# --- typed keys and the index form -----------------------------------------------------------


def test_typed_keys_read_write_and_contain() -> None:
    """stash[key] reads and writes the key's path; `in` reports presence."""
    searches = StashKey[int]("counts.search", default=0)
    stash = Stash()
    assert searches not in stash
    assert stash[searches] == 0
    stash[searches] += 1
    stash[searches] += 1
    assert searches in stash
    assert stash[searches] == 2
    assert stash.get("counts.search") == 2


def test_typed_key_without_default_raises_key_error_when_absent() -> None:
    """A key with no default raises KeyError naming its path when nothing is stored."""
    name = StashKey[str]("user.name")
    stash = Stash()
    assert not name.has_default
    with pytest.raises(KeyError, match=r"user\.name"):
        stash[name]
    with pytest.raises(LookupError):
        _ = name.default
    stash[name] = "ada"
    assert stash[name] == "ada"
    del stash[name]
    assert name not in stash
    with pytest.raises(KeyError):
        del stash[name]


def test_typed_key_values_are_validated_and_copied() -> None:
    """stash[key] = value validates plain data and copies like set()."""
    tags = StashKey[list[str]]("tags")
    stash = Stash()
    value = ["a"]
    stash[tags] = value
    value.append("b")
    assert stash[tags] == ["a"]
    with pytest.raises(InvalidStashValueError):
        stash[StashKey[Any]("bad")] = {1, 2}


def test_typed_key_default_must_be_plain_data() -> None:
    """A StashKey default that is not plain data fails at construction."""
    with pytest.raises(InvalidStashValueError):
        StashKey[Any]("x", default=object())


def test_typed_key_repr() -> None:
    """A key's repr shows its path and default."""
    assert repr(StashKey[int]("a.b", default=0)) == "StashKey('a.b', default=0)"
    assert repr(StashKey[int]("a.b")) == "StashKey('a.b')"
    assert StashKey[int]("a.b").path == "a.b"


@pytest.mark.parametrize("op", ["get", "set", "del", "in"])
def test_string_index_raises_type_error_pointing_to_methods(op: str) -> None:
    """stash["a.b"] is not supported: TypeError names the method to use instead."""
    stash: Any = Stash({"a": {"b": 1}})
    expected = {"get": "get", "set": "set", "del": "delete", "in": "has"}[op]

    def use_string_index() -> None:
        if op == "get":
            stash["a.b"]
        elif op == "set":
            stash["a.b"] = 2
        elif op == "del":
            del stash["a.b"]
        else:
            "a.b" in stash  # noqa: B015

    with pytest.raises(TypeError, match=rf"stash\.{expected}\('a\.b'"):
        use_string_index()
    assert stash.all() == {"a": {"b": 1}}


def test_other_index_types_raise_type_error() -> None:
    """Indexing with something that is neither a str nor a StashKey raises TypeError."""
    stash: Any = Stash()
    with pytest.raises(TypeError, match="StashKey"):
        stash[0]


def test_stash_is_not_iterable() -> None:
    """A stash is not a dict: iterating it raises TypeError."""
    with pytest.raises(TypeError):
        iter(Stash({"a": 1}))  # type: ignore[call-overload]


def test_repr_shows_the_data() -> None:
    """repr names the class and shows the stored data, abbreviated when large."""
    stash = Stash({"counts": {"search": 3}})
    assert repr(stash) == "Stash({'counts': {'search': 3}})"
    big = Stash({f"k{i}": i for i in range(100)})
    assert repr(big).startswith("Stash({")
    assert len(repr(big)) < 200
    assert type(stash).__module__ == "pipeline"
    assert StashKey.__module__ == "pipeline"


# --- properties ------------------------------------------------------------------------------

plain_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
)
plain_data = st.recursive(
    plain_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=15,
)
segments = st.text(
    st.characters(exclude_characters=".", exclude_categories=["Cs"]), min_size=1, max_size=6
)
paths = st.lists(segments, min_size=1, max_size=4).map(".".join)


def _as_stored(value: Any) -> Any:
    """What the stash gives back for a value: tuples become lists."""
    if isinstance(value, dict):
        return {key: _as_stored(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_stored(item) for item in value]
    return value


@given(paths, plain_data)
def test_set_then_get_round_trips(path: str, value: Any) -> None:
    """Any plain data set at any valid path reads back equal (tuples as lists)."""
    stash = Stash()
    stash.set(path, value)
    assert stash.has(path)
    assert stash.get(path) == _as_stored(value)
    key = StashKey[Any](path)
    assert stash[key] == _as_stored(value)


addressable_data = st.recursive(
    plain_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(segments, children, max_size=3)
    ),
    max_leaves=12,
)


@given(st.dictionaries(segments, addressable_data, max_size=4), paths, plain_data)
def test_set_changes_only_its_path(seed: dict[str, Any], path: str, value: Any) -> None:
    """After set, the path reads back the value and every unrelated leaf is unchanged."""
    stash = Stash(seed)
    snapshot = stash.all()
    leaves = stash.keys()
    before = {p: stash.get(p) for p in leaves}
    try:
        stash.set(path, value)
    except InvalidStashValueError:
        assert stash.all() == snapshot  # a path through a scalar or a bad index: no change
        return
    assert stash.get(path) == _as_stored(value)
    for leaf, old in before.items():
        if leaf != path and not leaf.startswith(path + ".") and not path.startswith(leaf + "."):
            assert stash.get(leaf) == old


def test_append_creates_then_extends_a_list_and_copies_the_item() -> None:
    """`append` starts a list at a missing path, extends it, and stores a copy of the item."""
    stash = Stash()
    item = {"tool": "search"}
    assert stash.append("log.entries", item) == 1
    assert stash.append("log.entries", {"tool": "fetch"}) == 2
    item["tool"] = "changed"
    assert stash.get("log.entries") == [{"tool": "search"}, {"tool": "fetch"}]


def test_append_refuses_a_non_list_and_non_plain_values() -> None:
    """Appending to a scalar, or appending an object, raises `InvalidStashValueError`."""
    stash = Stash({"count": 1})
    with pytest.raises(InvalidStashValueError) as err:
        stash.append("count", 2)
    assert err.value.code == "E_INVALID_STASH_VALUE"
    with pytest.raises(InvalidStashValueError):
        stash.append("items", object())
    assert not stash.has("items")


def test_increment_counts_from_zero_or_the_key_default_and_creates_parents() -> None:
    """`increment` starts at 0 (or the key's default), creates parent dicts, returns the count."""
    stash = Stash()
    assert stash.increment("counts.search") == 1
    assert stash.increment("counts.search", by=2) == 3
    key = StashKey[int]("budget.left", default=10)
    assert stash.increment(key, by=-1) == 9
    assert stash.get("counts") == {"search": 3}
    assert stash[key] == 9


def test_increment_works_through_lists_and_refuses_non_integers() -> None:
    """A list index in the path works; a non-int value or step raises with its code."""
    stash = Stash({"rows": [{"n": 1}], "name": "x"})
    assert stash.increment("rows.0.n") == 2
    with pytest.raises(InvalidStashValueError) as err:
        stash.increment("name")
    assert err.value.code == "E_INVALID_STASH_VALUE"
    with pytest.raises(InvalidStashValueError):
        stash.increment("rows.0.n", by=1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidStashValueError):
        stash.increment("name.deeper")
    assert stash.get("rows") == [{"n": 2}]


PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=25,
)


def _containers(value: object) -> list[int]:
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in _containers(v))]
    if isinstance(value, list | tuple):
        return [id(value), *(i for v in value for i in _containers(v))]
    return []


@settings(max_examples=200)
@given(value=PLAIN)
def test_stored_values_are_private_copies_equal_to_the_original(value: object) -> None:
    """What is stored equals what was given (tuples as lists) and shares no container with it."""
    stash = Stash()
    stash.set("v", value)
    stored = stash.get("v")
    assert stored == json.loads(json.dumps(value))
    assert not set(_containers(stored)) & set(_containers(value))
    stash.append("log", {"record": value})
    assert stash.get("log") == [{"record": stored}]


def test_a_tool_calls_frozen_arguments_are_stored_as_plain_data() -> None:
    """Appending a record holding a call's (read-only) arguments stores plain, editable data."""
    call = ToolCall.completed(id="c", tool="t", args={"q": {"tags": ["a"]}}, results="ok")
    stash = Stash()
    stash.append("audit", {"id": call.id, "args": call.args})
    [record] = stash.get("audit")
    assert type(record["args"]) is dict
    assert type(record["args"]["q"]["tags"]) is list
    record["args"]["q"]["tags"].append("b")  # the copy is the caller's own
    assert stash.get("audit.0.args.q.tags") == ["a"]


def test_cycles_and_subclasses_still_get_their_exact_error_or_value() -> None:
    """The fast copy hands cycles, deep nests and scalar subclasses to the general path."""
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(InvalidStashValueError, match="circular reference"):
        Stash().set("x", {"a": loop})
    deep: object = 1
    for _ in range(200):
        deep = [deep]
    with pytest.raises(InvalidStashValueError, match="nested deeper"):
        Stash().append("x", deep)

    class Level(enum.IntEnum):
        HIGH = 3

    stash = Stash()
    stash.set("x", {"level": Level.HIGH, "ok": [True]})
    assert type(stash.get("x.level")) is int


# --- the end of the turn ----------------------------------------------------------------------

_COUNT = StashKey[int]("counts.n", default=0)

_WRITES: list[tuple[str, Callable[[Stash], object]]] = [
    ("set", lambda s: s.set("counts.n", 2)),
    ("delete", lambda s: s.delete("counts.n")),
    ("increment", lambda s: s.increment("counts.n")),
    ("append", lambda s: s.append("log", "x")),
    ("update", lambda s: s.update("counts.n", lambda n: n + 1)),
    ("setitem", lambda s: s.__setitem__(_COUNT, 3)),
    ("delitem", lambda s: s.__delitem__(_COUNT)),
]


@pytest.mark.parametrize("write", [w for _, w in _WRITES], ids=[n for n, _ in _WRITES])
def test_a_finished_stash_refuses_every_write_and_still_reads(
    write: Callable[[Stash], object],
) -> None:
    """After `finish`, each write raises and changes nothing; reads work as before, and the
    stash is still a plain `Stash` (no class swap)."""
    stash = Stash({"counts": {"n": 1}, "log": ["a"]})
    data = stash.finish()
    with pytest.raises(InvalidStashValueError, match="the turn has ended"):
        write(stash)
    assert data == {"counts": {"n": 1}, "log": ["a"]}
    assert stash.get("counts.n") == 1
    assert stash[_COUNT] == 1
    assert type(stash) is Stash


def test_increment_follows_the_parents_that_writes_replace_or_remove() -> None:
    """A counter's remembered parent never outlives it: after its dict is deleted, replaced by
    `set` or `update`, or turned into a scalar, increments count in what the stash holds now."""
    stash = Stash()
    key = StashKey[int]("a.b.count", default=0)
    assert stash.increment(key) == 1
    assert stash.increment("a.b.other") == 1
    stash.delete("a.b")
    assert stash.increment(key) == 1
    assert stash.get("a") == {"b": {"count": 1}}
    stash.set("a", {"b": {"count": 10}})
    assert stash.increment(key) == 11
    assert stash.increment("a.b.other") == 1
    stash.update("a.b", lambda b: {**b, "count": 20})
    assert stash.increment(key) == 21
    stash[StashKey[dict[str, int]]("a.b")] = {"count": 5}
    assert stash.increment(key) == 6
    stash.set("a.b", 3)
    with pytest.raises(InvalidStashValueError):
        stash.increment(key)
    stash.set("a", {"b": {}})
    assert stash.increment(key, 2) == 2
    assert stash.all() == {"a": {"b": {"count": 2}}}


def test_remembered_paths_read_append_and_delete_what_the_stash_holds_now() -> None:
    """`get`, `append` and `delete` on a path written before see every later write above it:
    a list appended to, deleted, its parent replaced, then turned into a scalar."""
    stash = Stash()
    assert stash.append("x.items", 1) == 1
    assert stash.append("x.items", 2) == 2
    assert stash.get("x.items") == [1, 2]
    assert stash.delete("x.items")
    assert not stash.delete("x.items")
    assert stash.get("x.items") is None
    assert stash.append("x.items", 3) == 1
    stash.set("x", {"items": [9]})
    assert stash.append("x.items", 4) == 2
    assert stash.get("x.items") == [9, 4]
    stash.delete("x")
    assert stash.get("x.items", "gone") == "gone"
    assert stash.append("x.items", 5) == 1
    stash.set("x.items", "text")
    with pytest.raises(InvalidStashValueError):
        stash.append("x.items", 6)
    assert stash.all() == {"x": {"items": "text"}}

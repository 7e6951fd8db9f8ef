"""Type checks for Stash and StashKey (checked by mypy, never collected by pytest)."""

from __future__ import annotations

from typing import Any, assert_type

from pipeline import Stash, StashKey, canonical_json, tool_call_checksum

stash = Stash({"counts": {"search": 0}})

SEARCHES = StashKey[int]("counts.search", default=0)
NAME = StashKey[str]("user.name")
TAGS = StashKey[list[str]]("tags", default=[])

assert_type(stash[SEARCHES], int)
assert_type(stash[NAME], str)
assert_type(stash[TAGS], list[str])
assert_type(SEARCHES.default, int)
assert_type(SEARCHES.path, str)
assert_type(SEARCHES in stash, bool)

stash[SEARCHES] = 3
stash[SEARCHES] += 1
stash[NAME] = "ada"
stash[TAGS] = ["a", "b"]

# Writing the wrong type through a typed key is rejected. mypy reports it as "Cannot infer value
# of type parameter T of __setitem__" ([misc]): the key pins T and the value contradicts it.
stash[SEARCHES] = "three"  # type: ignore[misc]
stash[TAGS] = [1, 2]  # type: ignore[misc]

# A typed key's default must match its type.
StashKey[int]("n", default="zero")  # type: ignore[arg-type]

# A string index is not the typed form: use get()/set().
stash["counts.search"]  # type: ignore[index]
stash["counts.search"] = 1  # type: ignore[index]

# A stash is not a dict: it cannot be iterated.
for _path in stash:  # type: ignore[misc]
    pass

# Untyped access is Any; update returns what fn returns.
assert_type(stash.get("counts.search"), Any)
assert_type(stash.update("counts.search", lambda n: n + 1, default=0), Any)
assert_type(stash.update("flag", lambda _: True), bool)
assert_type(stash.has("counts"), bool)
assert_type(stash.delete("counts"), bool)
assert_type(stash.keys(), list[str])
assert_type(stash.all(), dict[str, Any])

assert_type(canonical_json({"a": 1}), str)
assert_type(tool_call_checksum("search", {"q": "x"}), str)

"""The call ids announced by the running turns of each conversation, in this process.

Turns of one conversation may run at the same time (two requests of one chat). Each loads the
conversation's stored calls when it starts, so neither sees the ids the other announces, and a
provider that numbers its calls (``call_0``) would give both turns' calls one id: the next turn
would read two calls under it, and providers pair a result with its call by id. So while any
turn of a conversation runs, the ids its turns announce are kept here, and the executor treats
them as taken (`DispatchContext.is_call_id_taken`). They are dropped when the conversation's
last running turn ends: a turn that starts later finds them among the stored calls it loads.

Turns of one conversation running in different processes do not see each other here; see
docs/architecture.md, "Conversations".
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Final

__all__ = ["NO_IDS", "announce", "enter", "leave"]

NO_IDS: Final[frozenset[str]] = frozenset()
"""The running ids of a turn without a conversation: none."""

_lock = threading.Lock()  # turns of one conversation may run on several event loops
_running: dict[str, tuple[int, set[str]]] = {}
"""Per conversation: how many of its turns run, and the ids they announced."""


def enter(conversation_id: str) -> set[str]:
    """A turn of ``conversation_id`` starts: return the ids its running turns announced.

    The set is shared with those turns and grows as they announce more; the caller reads it
    and passes it back to `announce`, and calls `leave` when the turn ends.
    """
    with _lock:
        count, ids = _running.get(conversation_id, (0, set()))
        _running[conversation_id] = (count + 1, ids)
        return ids


def announce(ids: set[str], announced: Iterable[str]) -> None:
    """Add the ids an assistant message announced to its conversation's running ids."""
    with _lock:
        ids.update(announced)


def leave(conversation_id: str) -> None:
    """A turn of ``conversation_id`` ended; the last one to end drops the ids."""
    with _lock:
        count, ids = _running[conversation_id]
        if count > 1:
            _running[conversation_id] = (count - 1, ids)
        else:
            del _running[conversation_id]

"""Test doubles for loopware users: a scripted model and a ready-made dispatch context.

`ScriptedModel` plays back a fixed list of `ModelResponse` values, so a turn, a middleware
stack or an example runs deterministically with no network. `make_dispatch_context` builds a
`DispatchContext` for unit-testing a single middleware without a runner.
"""

from ._testing import ScriptedModel as ScriptedModel
from ._testing import make_dispatch_context as make_dispatch_context

__all__ = ["ScriptedModel", "make_dispatch_context"]

"""Test doubles for loopware users: a scripted model, a ready-made dispatch context, a stall meter.

`ScriptedModel` plays back a fixed list of `ModelResponse` values, so a turn, a middleware
stack or an example runs deterministically with no network. `make_dispatch_context` builds a
`DispatchContext` for unit-testing a single middleware without a runner. `StallMeter` measures
the longest the event loop could not run anything (a tool that blocks it, a parse that holds the
interpreter lock), the cost every other turn on the loop pays.
"""

from ._testing import ScriptedModel as ScriptedModel
from ._testing import StallMeter as StallMeter
from ._testing import make_dispatch_context as make_dispatch_context

__all__ = ["ScriptedModel", "StallMeter", "make_dispatch_context"]

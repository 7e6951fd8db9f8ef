"""The ``loopware`` command: ``demo``, ``replay`` and ``pipelines``.

It sits on top of both libraries and uses their public API only (`pipeline` and `middleware`
never import it). The console script is ``loopware_cli._main:main``.
"""

from ._main import main as main

__all__ = ["main"]

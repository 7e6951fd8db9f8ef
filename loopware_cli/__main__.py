"""``python -m loopware_cli``: the same as the ``loopware`` command."""

import sys

from ._main import main

sys.exit(main())

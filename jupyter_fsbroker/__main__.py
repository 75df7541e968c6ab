"""``python -m jupyter_fsbroker``: the same as the ``jupyter-fsbroker`` command."""

import sys

from .cli import main

sys.exit(main())

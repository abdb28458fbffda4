"""``python -m hmde``: the ``hmde`` command."""

import sys

from .cli.main import main

sys.exit(main())

"""``python -m prism.cli``: the same as the ``prism`` command."""

import sys

from prism.cli import main

sys.exit(main())

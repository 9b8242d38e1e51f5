"""``python -m softrank.harness.cli``: the ``softrank`` program."""

import sys

from . import main

if __name__ == "__main__":  # (documentation tools import this module too)
    sys.exit(main())

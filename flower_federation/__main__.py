"""`python -m flower_federation`: the command line (cli/main.py)."""

import sys

from flower_federation.cli.main import main

sys.exit(main())

"""`python -m queuelog.cli`: the `queuelog` command."""

import sys

from queuelog.cli.main import main

sys.exit(main())

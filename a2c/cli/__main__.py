"""`python -m a2c.cli ...` is `a2c ...`."""

import sys

from a2c.cli.main import main

sys.exit(main())

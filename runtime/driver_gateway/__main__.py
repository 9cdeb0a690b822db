"""`python -m a2c.runtime.driver_gateway RUN_DIR`: the run's driver gateway process."""

import sys

from .server import main

sys.exit(main())

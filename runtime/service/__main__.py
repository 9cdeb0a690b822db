"""`python -m a2c.runtime.service RUN_DIR`: serve the grading API for one run."""

import sys

from a2c.runtime.service.server import main

sys.exit(main())

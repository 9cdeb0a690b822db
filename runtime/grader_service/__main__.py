"""`python -m a2c.runtime.grader_service RUN_DIR`: serve the grading API for one run."""

import sys

from a2c.runtime.grader_service.server import main

sys.exit(main())

"""`python -m sweeps.evidence ...` (`make evidence`): sweeps/evidence/driver.py."""

import sys

from sweeps.evidence.driver import main

sys.exit(main())

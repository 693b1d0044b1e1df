"""``python -m fairsched``: the command line."""

import sys

from fairsched.cli import main

sys.exit(main())

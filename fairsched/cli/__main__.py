"""``python -m fairsched.cli``: the command line."""

import sys

from fairsched.cli.app import main

sys.exit(main())

"""``python -m fusion_dse`` runs the command line."""

import sys

from fusion_dse.cli import main

sys.exit(main())

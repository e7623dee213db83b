"""``python -m fusion_dse`` runs the command line (Ctrl-C while importing is one line too)."""

import sys

try:
    from fusion_dse.cli import main
except KeyboardInterrupt:
    print("fusion-dse: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())

"""``python -m fusion_dse`` and the ``fusion-dse`` console script: run the command line.

The command-line modules import pandas, matplotlib and the search layer; Ctrl-C while they load
ends in one line and exit status 130 too (`fusion_dse.cli.main` handles it afterwards).
"""

import sys

__all__ = ["run"]


def run() -> int:
    """Import the command line and run it; returns the exit status."""
    try:
        from fusion_dse.cli import main
    except KeyboardInterrupt:
        print("fusion-dse: interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(run())

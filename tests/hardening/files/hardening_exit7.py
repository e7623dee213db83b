"""A model factory that exits."""
import sys


def model():
    sys.exit(7)

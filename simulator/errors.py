"""Errors caused by what a user gave the tool (a model, a file, a shape, a config).

Every error here carries a one-line message that says what was wrong and where; the CLI prints it
as is and exits with status 2. Programming errors are never raised as these.
"""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(ValueError):
    """Bad user input: the message is one line, naming the offending thing and where it is."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))

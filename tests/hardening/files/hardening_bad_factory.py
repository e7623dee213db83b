"""Factories that fail or return the wrong thing."""


def raises():
    raise RuntimeError("boom")


def not_a_module():
    return 42

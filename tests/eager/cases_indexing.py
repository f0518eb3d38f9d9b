"""Op cases (being written)."""

CASES: list = []

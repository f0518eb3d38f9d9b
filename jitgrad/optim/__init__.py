"""`jitgrad.optim` (being written)."""

"""`jitgrad.nn.functional` (being written)."""

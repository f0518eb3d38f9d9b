"""`jitgrad.utils.data` (being written)."""

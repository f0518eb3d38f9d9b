"""Inventory of the torch API in jitgrad: dump_names (needs torch), count_usage, inventory."""

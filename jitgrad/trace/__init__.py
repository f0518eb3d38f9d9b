"""Capture: CPython 3.11 bytecode -> graph IR, guards, graph breaks (`@jitgrad.compile`)."""

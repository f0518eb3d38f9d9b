"""Capture: a frame's bytecode run symbolically over fake tensors into a graph.

`tracing.trace_function` sets up one trace (its graph, guards and lifted inputs), the
`translator` runs the bytecode, `calls` decides each call (inline it, record an op,
run it for real, or break), `fake` turns tensor ops into graph nodes, and `variables`,
`sources`, `symbolic`, `side_effects`, `user_objects`, `view_writes` are what a trace
tracks: values, where they came from, symbolic sizes, writes to the caller's state,
user-defined objects and in-place writes through views.
"""

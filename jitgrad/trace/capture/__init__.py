"""Capture: a frame's bytecode run symbolically over fake tensors into a graph.

`tracing.trace_function` sets up one trace (its graph, guards and lifted inputs), the
`translator` runs the bytecode, `calls` decides each call (inline it, record an op,
run it for real, or break; `inlining` holds what is inlined), `fake` holds the values,
whose in-place ops `functionalize` records as out-of-place ones, `recorder` turns tensor
ops into graph nodes, and `variables`, `sources`, `symbolic`, `side_effects`,
`user_objects`, `view_writes` are what a trace tracks: values, where they came from,
symbolic sizes, writes to the caller's state, user-defined objects and in-place writes
through views. Importing the package gives FakeTensor its in-place methods.
"""

from jitgrad.trace.capture import functionalize

functionalize.install()

"""The graph IR: `Graph`/`Node` (Note [Graph IR]), `GraphModule` (a graph as a Python
function) and `Interpreter`/`Retracer` (a graph run node by node, or again into a new one).
"""

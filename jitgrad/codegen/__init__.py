"""Numba backend: lowers captured graphs to fused, vectorized kernels."""

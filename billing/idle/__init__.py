"""Idle GPU slices: allocated but below their pool's utilisation threshold for its window."""

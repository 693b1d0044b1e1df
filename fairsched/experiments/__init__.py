"""Reproductions of the seed papers' experiments, runnable as modules."""

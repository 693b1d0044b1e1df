"""Reproductions of the cited papers' experiments (Li, Liu and Ji 2021; Morishita 2026), runnable as modules."""

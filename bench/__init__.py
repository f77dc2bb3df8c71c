"""Benchmarks: the switch alone (switch.py)."""

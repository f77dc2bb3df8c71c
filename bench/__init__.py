"""Benchmarks: the runner (runner.py: profiles in profiles.py, provenance in provenance.py)
and the experiments on it; the switch lab (lab.py), its traffic (traffic.py), the timed
measures (rate.py), instruction counts (instructions.py); `make results` (results.py)."""

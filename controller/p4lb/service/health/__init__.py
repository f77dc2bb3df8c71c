"""Health checks: settings in use, rise/fall, probes, the checker, the weight overlay, its file."""

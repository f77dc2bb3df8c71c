"""Metrics: what `p4lb run` serves on `[metrics] listen` — Prometheus metrics, the stats page."""

"""The service: one-shot operations on a switch, `p4lb run`, and backend health checks."""

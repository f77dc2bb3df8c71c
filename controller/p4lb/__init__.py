"""p4lb: a Layer-4 load balancer in P4 for BMv2, and its P4Runtime controller."""

__version__ = "0.1.0"

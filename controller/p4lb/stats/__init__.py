"""Stats: switch counters -> per-backend shares, Jain's index, windows since a change, rates."""

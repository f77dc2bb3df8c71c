"""The pipeline: P4Info schema, entries, write plans, WRR/Maglev/slot tables, digests; pure."""

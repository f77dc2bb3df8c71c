"""The intent: config model and parsing, validation, runtime edits, the file and its lock; no P4."""

"""Kept for bench/qos.py, which imports running_lab from here; the e2e layer's helpers are
in tests/e2e/support.py."""

from tests.e2e.support import running_lab

__all__ = ["running_lab"]

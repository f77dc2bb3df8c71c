"""Reference models for tests, bench and scripts; the controller never imports this package."""

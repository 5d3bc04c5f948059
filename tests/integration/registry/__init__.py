"""Integration tests of the registry context."""

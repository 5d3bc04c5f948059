"""Integration tests of the governance context."""

"""Integration tests of the claims context."""

"""Integration tests of the db context."""

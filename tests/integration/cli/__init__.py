"""Integration tests of the cli context."""

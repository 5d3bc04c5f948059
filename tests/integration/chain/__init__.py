"""Integration tests of the chain context."""

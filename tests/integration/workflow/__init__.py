"""Integration tests of the verification workflow (issue 29)."""

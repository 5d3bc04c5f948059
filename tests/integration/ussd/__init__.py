"""Integration tests of the ussd context."""

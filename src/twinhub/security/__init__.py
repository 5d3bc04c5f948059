"""Secrets and the rules around them: PIN encryption, PIN strength, bearer tokens."""

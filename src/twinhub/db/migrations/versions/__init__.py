"""Alembic revisions. A package (alembic skips this file) so that the import contract can
check that no revision imports twinhub code: each carries what it needs, frozen."""

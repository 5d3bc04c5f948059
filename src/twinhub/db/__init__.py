"""Storage: one SQLAlchemy engine (SQLite by default, PostgreSQL in production)."""

"""Pure rules: no application, no server, no database."""

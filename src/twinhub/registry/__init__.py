"""Interface A: the domain registry API (`/v1/...`, JSON, Bearer API keys) and GraphQL."""

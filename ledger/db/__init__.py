"""Storage: engines, ORM models and the schema revision. Knows nothing of logs or the CLI."""

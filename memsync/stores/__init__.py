"""Adapters to the deployment's stores; the only modules that touch sqlite3 and qdrant files."""

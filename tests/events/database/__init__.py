"""The database machinery: constraints, locks, the pipeline, rows, the audit table, the backend."""

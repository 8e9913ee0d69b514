"""Database machinery of the core: statements, locks, constraint names, the outbox SQL.

Only the core's verbs (`events.services`) and read models (`events.read`) use it."""

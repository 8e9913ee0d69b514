"""Events and their configuration: lifecycle verbs, the config models' services, "closed" and
the other derived flags."""

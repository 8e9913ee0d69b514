"""Configuration and commands: knobs that fail closed, secrets, host ports, make run, seed_demo."""

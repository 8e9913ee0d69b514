"""The communication scheduler pass: sequential, set-based, concurrent, and its staff surface."""

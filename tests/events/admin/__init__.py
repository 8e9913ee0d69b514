"""The staff admin: pages, guards, permissions, the write paths, the index."""

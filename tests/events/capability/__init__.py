"""Capability tokens: purposes, secrets and fallbacks, and the real server refusing a bad secret."""

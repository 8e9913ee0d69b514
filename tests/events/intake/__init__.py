"""The public intake: the API and form, its fast path, hostile input, properties, rate limits."""

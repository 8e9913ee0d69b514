"""Mail: rendering context, outbox delivery over SMTP (and end to end), an event's outbox rows."""

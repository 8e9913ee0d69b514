"""The waiting list: joining, offers, accepting, expiry, the staff verbs and the pages."""

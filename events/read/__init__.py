"""Read models for people: shared queries, the staff dashboard, exports, calendar files."""

"""The event dashboard and the attendee exports."""

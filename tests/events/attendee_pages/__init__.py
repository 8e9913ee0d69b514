"""The attendee's pages: events, tickets, self-cancel, the /ics calendar, hostile input on them."""

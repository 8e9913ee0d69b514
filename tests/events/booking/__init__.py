"""Booking: registrations, the `events_book` call, the seat engine, the factories."""

"""Booking: registrations, the booking statement, the seat engine, the factories."""

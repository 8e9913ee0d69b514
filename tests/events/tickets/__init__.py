"""PDF tickets and name badges: fonts and text in every script, the ticket download from the
tickets link, the ticket attached to the confirmation mail, and badge sheets (admin, worker)."""

"""The QR code of a registration's barcode: one definition for every surface that shows it (the
tickets page's inline SVG, the PDF ticket, the name badges), so the desk scans the same code
whatever was printed or shown.

The code holds the barcode's digits and nothing else (no link, no token): error correction
level M, numeric mode, version 1 for the ≤ 20 digits of a barcode.
"""

from __future__ import annotations

import segno

ERROR_LEVEL = "m"


def qr_code(barcode: str) -> segno.QRCode:
    return segno.make_qr(barcode, error=ERROR_LEVEL)

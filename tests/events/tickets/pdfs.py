"""Reading the PDFs back as their readers would: the text layer (pypdf) and the QR codes on
the page as printed (pypdfium2 draws the page, zxing-cpp decodes what a scanner would)."""

from __future__ import annotations

import unicodedata
from io import BytesIO

import pypdfium2
import zxingcpp
from pypdf import PdfReader

# One name per script the badges and tickets must print (Latin with diacritics, Greek,
# Cyrillic, Arabic, Chinese, Japanese, Korean).
NAMES = {
    "latin": "Zoë Ångström-Dvořák",
    "greek": "Αλέξανδρος Παπαδόπουλος",
    "cyrillic": "Дмитрий Иванов",
    "arabic": "محمد عبد الله",
    "chinese": "王小明",
    "japanese": "山田さくら",
    "korean": "김민준",
}


def pages(content: bytes) -> int:
    return len(PdfReader(BytesIO(content)).pages)


def text(content: bytes, page: int | None = None) -> str:
    """The text layer, NFKC-normalised (Arabic is drawn with its joined, presentation forms,
    which normalise back to the letters typed), each run of white space one space (a name
    wrapped onto two lines reads as one)."""
    reader = PdfReader(BytesIO(content))
    chosen = reader.pages if page is None else [reader.pages[page]]
    layer = unicodedata.normalize("NFKC", "\n".join(p.extract_text() for p in chosen))
    return " ".join(layer.split())


def image(content: bytes, page: int = 0, scale: float = 3.0):
    """The page as a picture (PIL), `scale` pixels per point."""
    document = pypdfium2.PdfDocument(content)
    try:
        return document[page].render(scale=scale).to_pil()
    finally:
        document.close()


def qr_codes(content: bytes, page: int = 0, scale: float = 3.0) -> list[str]:
    """What the QR codes of a page decode to, as a scanner reads the printed page."""
    found = zxingcpp.read_barcodes(
        image(content, page, scale), formats=zxingcpp.BarcodeFormat.QRCode
    )
    return sorted(result.text for result in found)


def metadata(content: bytes) -> dict:
    return dict(PdfReader(BytesIO(content)).metadata or {})

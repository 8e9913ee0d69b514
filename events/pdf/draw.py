"""What tickets and badges draw besides text: the barcode's QR code and the organiser's logo.

The QR code is vector: one filled path of the dark modules' horizontal runs, so it prints
sharp at any size and costs a few hundred bytes per code. It comes from `events.barcodes`, the
same code the tickets page shows and the desk scans.
"""

from __future__ import annotations

from io import BytesIO

from reportlab.lib.utils import ImageReader
from reportlab.pdfgen.canvas import Canvas

from events import barcodes

QUIET_MODULES = 2  # white modules around the code, inside its square


def qr(canvas: Canvas, barcode: str, *, x: float, y: float, size: float) -> None:
    """The QR code of `barcode` in the square of side `size` whose lower left corner is (x, y).

    Written as PDF operators in module units (one `cm` scales them): a badge sheet draws
    thousands of codes, and integer rectangles cost little to write and compress well."""
    matrix = barcodes.qr_code(barcode).matrix
    count = len(matrix)
    module = size / (count + 2 * QUIET_MODULES)
    runs = []
    for row_index, row in enumerate(matrix):
        row_y = QUIET_MODULES + count - 1 - row_index
        start = None
        for col_index, dark in enumerate([*row, 0]):
            if dark and start is None:
                start = col_index
            elif not dark and start is not None:
                runs.append(f"{QUIET_MODULES + start} {row_y} {col_index - start} 1 re")
                start = None
    canvas.addLiteral(
        f"q {module:.4f} 0 0 {module:.4f} {x:.3f} {y:.3f} cm 0 g {' '.join(runs)} f Q"
    )


def logo_reader(content: bytes | None) -> ImageReader | None:
    """The logo as reportlab reads it (one per document: reportlab then embeds it once)."""
    if not content:
        return None
    return ImageReader(BytesIO(content))


def logo(
    canvas: Canvas, reader: ImageReader, *, x: float, top: float, width: float, height: float
) -> float:
    """The logo scaled into `width` × `height` (its proportions kept), top left at (x, top);
    returns the width it took."""
    image_width, image_height = reader.getSize()
    scale = min(width / image_width, height / image_height)
    drawn_width, drawn_height = image_width * scale, image_height * scale
    canvas.drawImage(
        reader,
        x,
        top - drawn_height,
        drawn_width,
        drawn_height,
        mask="auto",
        preserveAspectRatio=True,
    )
    return drawn_width

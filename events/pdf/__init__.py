"""PDF tickets and name badges, drawn with reportlab from rows the caller loaded (no query here).

- `fonts`: the font chain of `EVENT_PDF_FONTS`, its coverage of the scripts names are written
  in (the system check events.E005), and the lock around text shaping;
- `text`: one line or a box of text in every script: a font per word from the chain, the
  Unicode bidirectional order, HarfBuzz shaping, and fitting (shrink, then wrap) into a box;
- `draw`: the QR code of a barcode and the organiser's logo on a page;
- `ticket`: the PDF ticket of one registration;
- `badges`: sheets of name badges on label layouts (`layouts`), page after page.
"""

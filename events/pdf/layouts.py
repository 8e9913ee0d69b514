"""Label layouts for name badges, as data: a page size and a grid of labels on it.

Sheets follow the makers' templates (Avery's L71xx A4 sheets); single badges are one label
filling its page (an A6 card, or the common 4 × 3 inch badge-holder insert). A new layout is a
new entry here: the badge drawing adapts to any label's size.
"""

from __future__ import annotations

from dataclasses import dataclass

# Points, computed as reportlab.lib.units and .pagesizes do (the same floats): the admin lists
# these layouts, and importing reportlab for four numbers would load it in every process.
inch = 72.0
mm = inch / 2.54 * 0.1
A4 = (210 * mm, 297 * mm)
A6 = (105 * mm, 148 * mm)


@dataclass(frozen=True)
class Layout:
    key: str
    title: str
    page: tuple[float, float]  # points
    label: tuple[float, float]  # points
    columns: int = 1
    rows: int = 1
    left: float = 0.0  # page edge to the first column
    top: float = 0.0  # page edge to the first row
    pitch: tuple[float, float] = (0.0, 0.0)  # label origin to the next one's (across, down)

    @property
    def per_page(self) -> int:
        return self.columns * self.rows

    def origin(self, index: int) -> tuple[float, float]:
        """The lower left corner of the `index`-th label of a page (across, then down)."""
        row, column = divmod(index, self.columns)
        x = self.left + column * self.pitch[0]
        y = self.page[1] - self.top - row * self.pitch[1] - self.label[1]
        return x, y


LAYOUTS: dict[str, Layout] = {
    layout.key: layout
    for layout in (
        Layout(
            key="L7160",
            title="A4 sheet, 21 labels of 63.5 × 38.1 mm (Avery L7160)",
            page=A4,
            label=(63.5 * mm, 38.1 * mm),
            columns=3,
            rows=7,
            left=7.2 * mm,
            top=15.1 * mm,
            pitch=(66.0 * mm, 38.1 * mm),
        ),
        Layout(
            key="L7163",
            title="A4 sheet, 14 labels of 99.1 × 38.1 mm (Avery L7163)",
            page=A4,
            label=(99.1 * mm, 38.1 * mm),
            columns=2,
            rows=7,
            left=4.65 * mm,
            top=15.15 * mm,
            pitch=(101.6 * mm, 38.1 * mm),
        ),
        Layout(
            key="L7165",
            title="A4 sheet, 8 labels of 99.1 × 67.7 mm (Avery L7165)",
            page=A4,
            label=(99.1 * mm, 67.7 * mm),
            columns=2,
            rows=4,
            left=4.65 * mm,
            top=13.1 * mm,
            pitch=(101.6 * mm, 67.7 * mm),
        ),
        Layout(key="A6", title="One badge per A6 page (105 × 148 mm)", page=A6, label=A6),
        Layout(
            key="4x3in",
            title="One badge per 4 × 3 inch page (badge holder insert)",
            page=(4 * inch, 3 * inch),
            label=(4 * inch, 3 * inch),
        ),
    )
}
DEFAULT_LAYOUT = "L7160"

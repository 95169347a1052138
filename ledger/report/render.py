"""Write a report as HTML (self-contained), PNG (one tall image) or PDF (a page a figure)."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import OutputFileError, UsageError
from ledger.model.report import ReportData

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = (".html", ".png", ".pdf")
DPI = 110


def check_format(out: str | os.PathLike[str]) -> Path:
    """Refuse a report file of a format it is not written in, before any work."""
    path = Path(out)
    if path.suffix.lower() not in FORMATS:
        raise UsageError(
            f"cannot write the report as {path.name!r}: name a .html, .png or .pdf file"
        )
    return path


def write_report(data: ReportData, out: str | os.PathLike[str]) -> Path:
    from ledger.report.figures import overview_figures

    path = check_format(out)
    suffix = path.suffix.lower()
    figures = overview_figures(data)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if suffix == ".html":
            from ledger.report.html import render_html

            images = {name: _png(figure) for name, figure in figures.items()}
            path.write_text(render_html(data, images), encoding="utf-8")
        elif suffix == ".png":
            path.write_bytes(_stacked_png([_png(f) for f in figures.values()]))
        else:
            from matplotlib.backends.backend_pdf import PdfPages

            with PdfPages(path) as pdf:
                for figure in figures.values():
                    pdf.savefig(figure)
    except OSError as exc:
        raise OutputFileError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _stacked_png(pngs: list[bytes]) -> bytes:
    """The figures one under the other in a single image (Pillow comes with matplotlib)."""
    from PIL import Image

    images = [Image.open(io.BytesIO(p)).convert("RGB") for p in pngs]
    width = max(i.width for i in images)
    sheet = Image.new("RGB", (width, sum(i.height for i in images)), "white")
    y = 0
    for image in images:
        sheet.paste(image, (0, y))
        y += image.height
    buffer = io.BytesIO()
    sheet.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()

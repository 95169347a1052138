"""Write a report as HTML (self-contained), PNG (one tall image: title and verdict, then the
figures) or PDF (a printable document: title, verdict, table and chains, then a figure to
a page, every page A4 landscape)."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import OutputFileError, UsageError
from ledger.model.report import ReportData

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# What `ledger report --out` accepts, and what its help lists (from this same table).
FORMAT_HELP = {
    ".html": "one self-contained page, its charts as inline SVG",
    ".png": "one image: title, verdict, then the figures",
    ".pdf": "a printable document: title, verdict, table, chains with their why cards, "
    "then the figures",
}
FORMATS = tuple(FORMAT_HELP)
DPI = 110


def formats_text(formats: tuple[str, ...] = FORMATS) -> str:
    """'.html, .png or .pdf'."""
    return ", ".join(formats[:-1]) + f" or {formats[-1]}" if len(formats) > 1 else formats[0]


def check_format(out: str | os.PathLike[str]) -> Path:
    """Refuse a report file of a format it is not written in, before any work."""
    path = Path(out)
    if path.suffix.lower() not in FORMATS:
        raise UsageError(f"cannot write the report as {path.name!r}: name a {formats_text()} file")
    return path


def write_report(data: ReportData, out: str | os.PathLike[str]) -> Path:
    """Write `data` to `out` in the format its suffix names; a missing folder is created."""
    from ledger.report.plots import plain_text

    path = check_format(out)
    suffix = path.suffix.lower()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with plain_text():  # saving draws the tick labels: inside the same settings
            if suffix == ".html":
                path.write_text(_html(data), encoding="utf-8")
            elif suffix == ".png":
                path.write_bytes(_png_report(data))
            else:
                _pdf(data, path)
    except OSError as exc:
        raise OutputFileError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path


def _html(data: ReportData) -> str:
    from ledger.report.figures import overview_figures
    from ledger.report.html import render_html

    charts = {name: svg(figure, name) for name, figure in overview_figures(data).items()}
    return render_html(data, charts)


def svg(figure: Figure, prefix: str) -> str:
    """The figure as inline SVG markup with its text as text (crisp at any zoom, searchable,
    copyable), scaled to its container; its ids prefixed so that several figures share a
    page without their clip paths crossing."""
    import re

    from matplotlib import rc_context

    buffer = io.StringIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": prefix}):
        figure.savefig(buffer, format="svg")
    # the page isolates names with <bdi> and SVG text runs left to right: the figures'
    # isolation marks are not needed there, and the page holds no bidi control at all
    text = buffer.getvalue().replace("\u2068", "").replace("\u2069", "")
    text = text[text.index("<svg") :]
    size = r'(<svg[^>]*?) width="[\d.]+pt" height="[\d.]+pt"'
    text = re.sub(size, r'\1 width="100%"', text, count=1)
    seen: dict[str, int] = {}

    def unique(match: re.Match[str]) -> str:  # a gid given to several artists repeats
        name = match.group(1)
        seen[name] = seen.get(name, 0) + 1
        suffix = f"-{seen[name]}" if seen[name] > 1 else ""
        return f'id="{prefix}-{name}{suffix}"'

    text = re.sub(r'\bid="([^"]*)"', unique, text)
    text = text.replace("url(#", f"url(#{prefix}-").replace('href="#', f'href="#{prefix}-')
    return text


def _png_report(data: ReportData) -> bytes:
    from ledger.report.figures import overview_figures
    from ledger.report.pages import heading_figure

    figures = [heading_figure(data), *overview_figures(data).values()]
    return _stacked_png([_png(f) for f in figures])


def _pdf(data: ReportData, path: Path) -> None:
    from matplotlib.backends.backend_pdf import PdfPages

    from ledger.report.figures import overview_figures
    from ledger.report.pages import text_pages, title_lines
    from ledger.report.text import one_line

    title, _ = title_lines(data)
    metadata = {"Title": one_line(title), "Creator": "ledger report"}
    with PdfPages(path, metadata=metadata) as pdf:
        for page in [*text_pages(data), *overview_figures(data, page=True).values()]:
            pdf.savefig(page)


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

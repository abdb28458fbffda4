"""Document files for the reading layer's tests, made by the tools that make them in the world: web pages and
Markdown written as text, PDFs printed by Chromium from HTML (skipped where no Chromium is installed: .ci/run installs
the distribution's), Word files by python-docx, an encrypted PDF by pypdf, a scanned page as an image."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("HMDE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")

ARTICLE_HTML = """<!doctype html><html lang="de"><head><meta charset="utf-8"><title>Das Finale</title></head>
<body><nav><a href="/">Start</a> | <a href="/sport">Sport</a> | <a href="/impressum">Impressum</a></nav>
<article><h1>Das Finale in Berlin</h1>
<p>Unsere Mannschaft hat am Sonntag das Fußballfinale gewonnen. Die Fans feierten bis spät in die Nacht.</p>
<h2>Die Tore</h2>
<p>Das erste Tor fiel in der zwölften Minute nach einer Ecke. Danach war das Spiel lange offen.</p>
</article><footer>© 2026 Zeitung. Alle Rechte vorbehalten. Kontakt | Datenschutz</footer></body></html>"""

MARKDOWN = """# Résultats de l'étude

Le **premier** résultat est [clair](http://example.org): la pluie augmente.

## Méthodes

- Nous avons mesuré la pluie chaque jour.
- Les mesures ont duré un an.
"""

CHINESE_TEXT = "北京今天下雨了。人们都带着雨伞。\n\n明天会是晴天。"


def two_page_html(first: str, second: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Report</title></head><body>"
            f"<p style='font-size:14pt'>{first}</p><p style='page-break-before: always; font-size:14pt'>{second}</p>"
            "</body></html>")


def print_pdf(html: str, out: Path) -> Path:
    """``html`` printed to ``out`` by Chromium (headless), without the print's header and footer."""
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine to print test PDFs (.ci/run installs the distribution's `chromium`)")
    page = out.with_suffix(".print.html")
    page.write_text(html, encoding="utf-8")
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                    f"--print-to-pdf={out}", page.as_uri()], check=True, capture_output=True, timeout=120)
    page.unlink()
    assert out.stat().st_size > 0
    return out


def word_file(out: Path) -> Path:
    import docx

    document = docx.Document()
    document.core_properties.title = "Quarterly report"
    document.core_properties.language = "en-GB"
    document.add_heading("Introduction", 1)
    document.add_paragraph("Sales rose in the third quarter. The new shop opened in May.")
    document.add_heading("Results", 1)
    document.add_paragraph("Profits doubled compared with last year.")
    table = document.add_table(rows=2, cols=2)
    for (r, c), text in {(0, 0): "Region", (0, 1): "Sales", (1, 0): "North", (1, 1): "120"}.items():
        table.cell(r, c).text = text
    document.save(out)
    return out


def encrypted_pdf(source: Path, out: Path) -> Path:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=str(source))
    writer.encrypt(user_password="secret", owner_password="owner")
    with open(out, "wb") as handle:
        writer.write(handle)
    return out


def scanned_pdf(out: Path) -> Path:
    """A page holding only a picture of text: no text layer, as a scanner makes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure(figsize=(4, 1))
    figure.text(0.1, 0.4, "Scanned words here", fontsize=20)
    picture = out.with_suffix(".png")
    figure.savefig(picture)
    plt.close(figure)
    html = f"<!doctype html><html><body><img src='{picture.as_uri()}' width='400'></body></html>"
    print_pdf(html, out)
    picture.unlink()
    return out


def mixed_folder(root: Path, pdf: bool = True) -> Path:
    """A folder of HTML, Markdown, Word, text (Chinese among them) and, where ``pdf``, a PDF of two pages."""
    (root / "web").mkdir(parents=True)
    (root / "web" / "finale.html").write_text(ARTICLE_HTML, encoding="utf-8")
    (root / "notes.md").write_text(MARKDOWN, encoding="utf-8")
    (root / "zh.txt").write_text(CHINESE_TEXT, encoding="utf-8")
    word_file(root / "report.docx")
    if pdf:
        print_pdf(two_page_html("The harbour was closed for repairs all winter.",
                                "Ships returned to the harbour in spring."), root / "harbour.pdf")
    return root

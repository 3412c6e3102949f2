"""report.html: the Markdown a report writer emits, rendered with its figures embedded (MLflow shows it)."""

import base64

import matplotlib.image
import numpy as np

from analysis.html_report import HTML_FILE, render_markdown, write_html

MARKDOWN = """# Reproduction report: `smoke`

## Verdicts

**Rule.** Per arm, *significant* = p < 0.05 & the CI excludes 0; see _the README_.

| arm | val/loss | note |
|---|---|---|
| baseline | 2.31 | a \\| b |
| no_decay | 2.29 | `x<y>` |

- Seeds: 0, 1
  - nested `item`
- Arms: `baseline`

**Loss against tokens.**

![Loss against tokens.](loss_vs_tokens.png)

![missing](not_there.png)
"""


def test_tables_lists_emphasis_and_code_become_html(tmp_path) -> None:
    html = render_markdown(MARKDOWN, tmp_path)
    assert "<h1>Reproduction report: <code>smoke</code></h1>" in html
    assert "<strong>Rule.</strong>" in html and "<em>significant</em>" in html and "<em>the README</em>" in html
    assert "p &lt; 0.05 &amp; the CI" in html
    assert "<th>arm</th><th>val/loss</th><th>note</th>" in html
    assert "<td>a | b</td>" in html and "<td><code>x&lt;y&gt;</code></td>" in html  # escaped pipe, code
    assert html.count("<tr>") == 3  # header + 2 rows; the |---| line is no row
    assert "<li>Seeds: 0, 1<ul>\n<li>nested <code>item</code></li>\n</ul></li>" in html


def test_figures_are_embedded_as_data_uris_and_a_missing_one_stays_a_link(tmp_path) -> None:
    picture = np.zeros((4, 6, 3))
    matplotlib.image.imsave(tmp_path / "loss_vs_tokens.png", picture)
    (tmp_path / "report.md").write_text(MARKDOWN)
    page = write_html(tmp_path / "report.md")
    assert page.name == HTML_FILE and page.parent == tmp_path
    text = page.read_text()
    encoded = base64.b64encode((tmp_path / "loss_vs_tokens.png").read_bytes()).decode()
    assert f'<img alt="Loss against tokens." src="data:image/png;base64,{encoded}">' in text
    assert '<a href="not_there.png">missing</a>' in text
    assert "<title>Reproduction report: smoke</title>" in text
    assert write_html(tmp_path / "report.md").read_text() == text  # same inputs, same bytes


def test_a_results_folder_page_names_its_figures_beside_it(tmp_path) -> None:
    """A committed folder holds the PNGs already: the page shows them by relative path, with no copy inside."""
    picture = np.zeros((4, 6, 3))
    matplotlib.image.imsave(tmp_path / "loss_vs_tokens.png", picture)
    (tmp_path / "report.md").write_text(MARKDOWN)
    text = write_html(tmp_path / "report.md", embed=False).read_text()
    assert '<img alt="Loss against tokens." src="loss_vs_tokens.png">' in text
    assert "base64" not in text
    assert '<a href="not_there.png">missing</a>' in text  # a missing figure is still a link

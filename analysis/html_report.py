"""An HTML copy of a report: its Markdown rendered, every figure embedded as a data URI or linked.

MLflow's artifact viewer shows `report.md` as text, so `![...](loss_vs_tokens.png)` stays a link there;
it renders HTML with its images inline but cannot follow a relative path, so `report.html` logged next to
the Markdown embeds its figures: a report a user reads whole inside the UI. A committed results folder
keeps its figures beside the page, so there the page names them by relative path (`embed=False`): the
figures are not stored twice, and the page still opens with them from the folder. The converter knows exactly what the report writers emit (analysis/markdown.py
and the report modules): headings, paragraphs, pipe tables, bullet lists (two levels), fenced code,
images, links, `code`, **bold** and *emphasis* / _emphasis_. Same Markdown and figures, same bytes.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from pathlib import Path

HTML_FILE = "report.html"
MAX_EMBEDDED_BYTES = 2_000_000  # a figure larger than this stays a link: the page must stay loadable
STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1100px; margin: 1.5em auto;
       padding: 0 1em; line-height: 1.45; color: #1f2328; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; }
th { background: #f6f8fa; }
code { background: #f6f8fa; padding: 0 3px; border-radius: 3px; font-size: 0.92em; }
pre { background: #f6f8fa; padding: 0.6em; overflow-x: auto; }
img { max-width: 100%; height: auto; display: block; margin: 0.5em 0; }
h1 { border-bottom: 1px solid #d0d7de; padding-bottom: 0.2em; }
"""

_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_EM = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])|(?<![\w])_(?!\s)(.+?)(?<!\s)_(?![\w])")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_BULLET = re.compile(r"^( *)[-*] (.*)$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True)
class _Figures:
    """Where a page's figures are, and whether they go inside it."""

    base: Path
    embed: bool


def write_html(markdown_path: Path, embed: bool = True) -> Path:
    """`report.html` beside `markdown_path`, with the figures it names (relative paths) embedded, or with
    `embed=False` shown from their files beside it."""
    markdown_path = Path(markdown_path)
    text = markdown_path.read_text()
    title = next((m.group(2) for m in map(_HEADING.match, text.splitlines()) if m), markdown_path.stem)
    body = render_markdown(text, markdown_path.parent, embed)
    page = (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(_plain(title))}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")
    out = markdown_path.with_name(HTML_FILE)
    out.write_text(page)
    return out


def render_markdown(text: str, base: Path, embed: bool = True) -> str:
    """The HTML body of `text`; its figures are files under `base`, embedded or linked (see write_html)."""
    figures = _Figures(Path(base), embed)
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("```"):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
            out.append("<pre><code>" + html.escape("\n".join(lines[i + 1:end])) + "</code></pre>")
            i = end + 1
        elif (m := _HEADING.match(line)):
            level = len(m.group(1))
            out.append(f"<h{level}>{_inline(m.group(2), figures)}</h{level}>")
            i += 1
        elif line.startswith("|"):
            end = _block_end(lines, i, lambda s: s.startswith("|"))
            out.append(_table(lines[i:end], figures))
            i = end
        elif _BULLET.match(line):
            end = _block_end(lines, i, lambda s: bool(_BULLET.match(s)) or s.startswith("   "))
            out.append(_bullets(lines[i:end], figures))
            i = end
        else:
            end = _block_end(lines, i, lambda s: not (s.startswith(("|", "```", "#")) or _BULLET.match(s)))
            paragraph = " ".join(s.strip() for s in lines[i:end])
            tag = "div" if _IMAGE.fullmatch(paragraph) else "p"
            out.append(f"<{tag}>{_inline(paragraph, figures)}</{tag}>")
            i = end
    return "\n".join(out)


def _block_end(lines: list[str], start: int, belongs) -> int:
    end = start + 1
    while end < len(lines) and lines[end].strip() and belongs(lines[end]):
        end += 1
    return end


def _cells(row: str) -> list[str]:
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [c.strip().replace("\\|", "|") for c in _CELL_SPLIT.split(row)]


def _table(rows: list[str], figures: _Figures) -> str:
    header, body = _cells(rows[0]), rows[1:]
    if body and set(body[0].replace("|", "").strip()) <= set("-: "):
        body = body[1:]
    parts = ["<table>", "<thead><tr>" + "".join(f"<th>{_inline(c, figures)}</th>" for c in header) + "</tr></thead>",
             "<tbody>"]
    parts += ["<tr>" + "".join(f"<td>{_inline(c, figures)}</td>" for c in _cells(r)) + "</tr>" for r in body]
    return "\n".join([*parts, "</tbody>", "</table>"])


def _bullets(rows: list[str], figures: _Figures) -> str:
    """Items at the first indent, each with its deeper items (and continuation lines) as a nested list."""
    items: list[tuple[str, list[str]]] = []
    top = len(_BULLET.match(rows[0]).group(1))
    for row in rows:
        m = _BULLET.match(row)
        if m and len(m.group(1)) <= top:
            items.append((m.group(2), []))
        elif m:
            items[-1][1].append(row[top + 2:] if row.startswith(" " * (top + 2)) else row.lstrip())
        else:  # a wrapped continuation of the last item
            items[-1] = (items[-1][0] + " " + row.strip(), items[-1][1])
    parts = ["<ul>"]
    for text, children in items:
        nested = _bullets(children, figures) if children else ""
        parts.append(f"<li>{_inline(text, figures)}{nested}</li>")
    return "\n".join([*parts, "</ul>"])


def _inline(text: str, figures: _Figures) -> str:
    """Escape, then code spans (kept literal), images, links, bold and emphasis."""
    codes: list[str] = []

    def keep_code(m: re.Match) -> str:
        codes.append(f"<code>{html.escape(m.group(1))}</code>")
        return f"\x00{len(codes) - 1}\x00"

    text = _CODE.sub(keep_code, text)
    text = html.escape(text, quote=False)
    text = _IMAGE.sub(lambda m: _image(m.group(1), m.group(2), figures), text)
    text = _LINK.sub(lambda m: f'<a href="{html.escape(m.group(2))}">{m.group(1)}</a>', text)
    text = _BOLD.sub(r"<strong>\1</strong>", text)
    text = _EM.sub(lambda m: f"<em>{m.group(1) or m.group(2)}</em>", text)
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], text)


def _image(alt: str, src: str, figures: _Figures) -> str:
    path = figures.base / html.unescape(src)
    alt_text = html.escape(html.unescape(alt))
    if "://" in src or not path.is_file() or (figures.embed and path.stat().st_size > MAX_EMBEDDED_BYTES):
        return f'<a href="{html.escape(src)}">{alt_text or html.escape(src)}</a>'
    if not figures.embed:
        return f'<img alt="{alt_text}" src="{html.escape(html.unescape(src))}">'
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{alt_text}" src="data:image/png;base64,{data}">'


def _plain(text: str) -> str:
    return _CODE.sub(r"\1", text).replace("**", "")

"""Self-contained HTML pages (plotly.js inlined, so they open offline) built from a command's ``--json``
document.

Every page is a function of the JSON document the command prints, never of live library objects, so a page
can be rebuilt from saved results (a sweep's rows, a colleague's ``--json`` file) and this package sits low
in the layer order: it imports only :mod:`tierwise.errors` and :mod:`tierwise.atomic`. plotly is the
optional ``report`` extra; :func:`require_plotly` turns its absence into one line, called before the work.

Pieces shared by every page: :func:`figure_div` (one plotly figure as a ``<div>``, plotly.js inlined once
per page), :func:`table` (an escaped HTML table), :func:`page` (the document around them) and
:func:`write_page` (atomic write to the user's path).
"""

from __future__ import annotations

import html as _html
from pathlib import Path

from tierwise.atomic import check_writable, write_atomic
from tierwise.errors import TierwiseError

__all__ = ["require_plotly", "figure_div", "table", "page", "write_page", "esc", "check_html", "human_key"]

_UNITS = {"ms": "ms", "s": "s", "us": "µs", "ns": "ns", "bytes": "bytes", "pct": "%", "usd": "USD", "w": "W",
          "j": "J", "gbps": "Gb/s", "ratio": "ratio"}
"""The unit a key's last word names (``ttft_s``, ``TPOT_mean_ms``): the label puts it in parentheses."""

_STYLE = ("body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;font-size:12px}"
          "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#eee}"
          "td.num{text-align:right}h2{margin-top:1.5em}pre{white-space:pre-wrap}")


def require_plotly() -> None:
    """plotly is the optional ``report`` extra: without it, one clear line (not an ImportError)."""
    try:
        import plotly  # noqa: F401
    except ImportError:

        raise TierwiseError("--html needs plotly, which is not installed; pip install 'tierwise[report]' "
                            "(or leave out --html)") from None


def check_html(path: str, option: str = "--html") -> None:
    """Before the work: plotly is installed and ``path`` can be written (one line otherwise)."""

    require_plotly()
    check_writable(path, option)


def esc(value) -> str:
    """``value`` as escaped HTML text (None -> empty)."""
    return "" if value is None else _html.escape(str(value))


def human_key(key: str, known: dict[str, str] | None = None) -> str:
    """A label for a JSON key or a dataset's metric name: ``known[key]`` when given, else its words with the
    unit its last word names in parentheses (``TPOT_mean_ms`` -> ``TPOT mean (ms)``, ``samples_per_s`` ->
    ``samples (per s)``, ``restart_s`` -> ``restart (s)``)."""
    if known and key in known:
        return known[key]
    words = key.split("_")
    unit = None
    if len(words) > 2 and words[-2:] == ["per", "s"]:
        words, unit = words[:-2], "per s"
    elif len(words) > 1 and words[-1].lower() in _UNITS:
        unit = _UNITS[words.pop().lower()]
    label = " ".join(words).replace(" per s ", "/s ")
    return f"{label} ({unit})" if unit else label


def figure_div(fig, div_id: str, *, first: bool) -> str:
    """One plotly figure as an HTML ``<div>``; ``first=True`` inlines plotly.js (once per page, offline)."""
    import plotly.io as pio

    return pio.to_html(fig, include_plotlyjs=bool(first), full_html=False, div_id=div_id)


def table(headers: list[str], rows: list[list], *, raw: bool = False) -> str:
    """An HTML table; cells are escaped unless ``raw`` (cells already HTML)."""
    cell = (lambda c: "" if c is None else str(c)) if raw else esc
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, body_html: str) -> str:
    """The whole document: ``title`` as <title> and <h1>, then ``body_html`` (already HTML)."""
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{_STYLE}</style></head><body>\n<h1>{esc(title)}</h1>\n{body_html}\n</body></html>\n")


def write_page(path: str | Path, document: str, option: str = "--html") -> str:
    """Write ``document`` atomically to ``path`` (:func:`tierwise.atomic.write_atomic`); return the path."""

    return write_atomic(path, document, option)

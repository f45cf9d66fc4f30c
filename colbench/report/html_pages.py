"""The report's HTML pages (``DIR/report.html``, ``colbench compare --html``), rendered from ``templates/`` by jinja2
with autoescape and StrictUndefined, as the viewer's pages are: no text of a run is ever written into markup by hand.

Every value a template writes is escaped as the report has always escaped it, with ``html.escape``'s entities
(``&quot;``, ``&#x27;``), where jinja2's own would write ``&#34;`` and ``&#39;``: the same characters, so a page and
the searches of its readers and tests stay what they were. Only matplotlib's SVG is written as markup (``|safe``,
in one place): matplotlib escapes the text in it.
"""

from __future__ import annotations

import functools
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

TEMPLATES = Path(__file__).parent / "templates"


def render_page(template: str, **context: Any) -> str:
    return _environment().get_template(template).render(**context)


def environment(folder: Path, **options: Any) -> jinja2.Environment:
    """The templates of ``folder`` (the report's, the viewer's): autoescaped, StrictUndefined, blocks trimmed."""
    # run-time import: jinja2 comes with the view extra, and reading runs or printing a leaderboard needs no page
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        **options,
    )


@functools.cache
def _environment() -> jinja2.Environment:
    from markupsafe import Markup  # jinja2's own dependency, loaded with it

    def escaped(value: Any) -> Markup:
        return value if isinstance(value, Markup) else Markup(escape(str(value)))

    return environment(TEMPLATES, finalize=escaped, keep_trailing_newline=True)

"""The Markdown the reports write, each file with named slots that Python fills.

`render("regions/tier-scaling.md", **slots)` fills one template with the figures the
report computed; the sentences live in the templates, never in Python. Filters turn a
number into the text the documents show (`{{ x|f(".2f") }}`, `{{ s|span }}`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

HERE = Path(__file__).parent


def f(x: float, spec: str) -> str:
    """A number in a format spec: `{{ 1234.5|f(",.0f") }}` is 1,234."""
    return format(x, spec)


def mmm(s: Any, spec: str = ".0f", scale: float = 1.0, div: float = 1.0, dash: str = "–") -> str:
    """A median with its (min–max), from a {median, min, max} dict or a (median, min, max)
    tuple, each times `scale` over `div`."""
    med, lo, hi = (
        x * scale / div for x in ((s["median"], s["min"], s["max"]) if isinstance(s, dict) else s)
    )
    return f"{med:{spec}} ({lo:{spec}}{dash}{hi:{spec}})"


def span(s: dict[str, float]) -> str:
    """A duration's median (min–max): one decimal from 10 s up, else one or two."""
    d = 1 if s["median"] >= 5 else 2

    def one(x: float) -> str:
        return f"{x:.1f}" if x >= 10 else f"{x:.{d}f}"

    return f"{one(s['median'])} ({one(s['min'])}–{one(s['max'])})"


def unwrap(text: str) -> str:
    """A paragraph wrapped in the template, on one line in the document (a line that starts
    with punctuation continues the one before without a space)."""
    text = re.sub(r"\s*\n\s*(?=[;,.:)])", "", text.strip())
    return re.sub(r"\s*\n\s*", " ", text)


def plural(n: int, word: str, many: str = "") -> str:
    return word if n == 1 else many or f"{word}s"


# The papers the experiments reproduce, as the documents name them (the results files and the
# claims number them: "002: ...").
PAPERS = {
    "000": "Fathurrohim and Basuki",
    "001": "Sudiatmika et al.",
    "002": "Usman et al.",
    "003": "Ramadhan and Wardhana",
    "004": "Maulana et al.",
}


def paper_named(claim: str) -> str:
    """A claim with its leading paper number ("002: ...", "002's ...") as the authors' names."""
    return re.sub(r"^(\d{3})\b", lambda m: PAPERS.get(m.group(1), m.group(1)), claim)


ENV = Environment(
    loader=FileSystemLoader(HERE),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    autoescape=False,
)
ENV.filters.update(f=f, mmm=mmm, span=span, unwrap=unwrap, plural=plural, paper_named=paper_named)


def render(name: str, /, **slots: Any) -> str:
    """The template `name` (a path under bench/templates) with its slots filled."""
    return ENV.get_template(name).render(**slots)


def module(name: str, /, **slots: Any) -> Any:
    """The template `name` rendered with `slots`, as an object whose attributes are the
    values its top-level `{% set %}` tags define (a claim's found / why / decided)."""
    return ENV.get_template(name).make_module(slots)

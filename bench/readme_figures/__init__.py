"""The figures README.md, results/README.md and the manual (docs/) quote, generated from the
results files: no hand-copied number.

A figure lives in a marked region, `<!-- results:NAME -->` ... `<!-- /results:NAME -->`,
filled from the Markdown template bench/templates/regions/NAME.md; REGIONS maps each NAME to
the function (in this package's module for its results) that computes the template's slots
from a results directory. Text outside the regions is prose and carries no measured number.

    python -m bench.readme_figures [--results DIR] [--check]

With --results results (the default) the files are rewritten in place; with another
directory (a quick run's scratch tree) the regenerated copies go into it (DIR/README.md
from results/README.md, DIR/README.top.md from README.md, DIR/docs/NAME.md from
docs/NAME.md), and the committed files stay as they are. --check changes nothing and
exits 1 naming each region that differs, one line each."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from bench import outdir, templates
from bench.readme_figures import experiments as ex
from bench.readme_figures import floor, others, switch, tier
from bench.readme_figures.common import MissingFile, Slots
from bench.readme_figures.provenance_table import provenance_table

ROOT = outdir.ROOT
READMES = {
    rel: ROOT / rel
    for rel in (
        "results/README.md",
        "README.md",
        "docs/benchmarks.md",
        "docs/design.md",
        "docs/tier.md",
        "docs/dsr.md",
    )
}
# A region is a block (markers on lines of their own) or inline (within a sentence, the
# generator's text then has no line break at its end).
REGION = re.compile(
    r"(<!-- results:(?P<name>[\w-]+) -->\n?)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S
)
REGIONS: dict[str, Callable[[Path], Slots]] = {
    "dsr": others.dsr,
    "experiments": ex.experiments,
    "verdicts": ex.verdicts,
    "profiles-compared": ex.profiles_compared,
    "overhead-goal": switch.goal,
    "switch-summary": switch.goal,
    "floor": floor.floor_table,
    "path-instructions": switch.path_instructions,
    "tier-failover": tier.tier_failover,
    "tier-ha": tier.tier_ha,
    "tier-scaling": tier.tier_scaling,
    "tier-cookie": tier.tier_cookie,
    "tier-overload": tier.tier_overload,
    "controller": others.controller,
    "older-ab-results": others.older,
    "older-ab-readme": others.older,
    "provenance": provenance_table,
    "collision-rate": switch.collision_rate,
    "maglev-plain": ex.maglev_plain,
    "leastconn-pairs": ex.over_argmin("p2c_pairs"),
    "leastconn-exact": ex.over_argmin("exact"),
    "choices-cost": ex.choices_cost,
    "restore-peer": ex.restore_peer,
    "peers": switch.peers,
    "qos-tiphon": others.qos_tiphon,
    "tier-summary": tier.tier_summary,
    "controller-summary": others.controller,
    "switch-prose": switch.switch_prose,
    "floor-bullets": floor.floor_bullets,
}
# Regions that share one template: the same figures in several documents.
TEMPLATES = {
    "maglev-plain": "_ratio-range",
    "leastconn-pairs": "_ratio-range",
    "leastconn-exact": "_ratio-range",
}


def fill(template: str, inline: bool, **slots: object) -> str:
    """A region template rendered, a line break at its end unless `inline`."""
    text = templates.render(f"regions/{template}.md", **slots)
    return text.rstrip("\n") + ("" if inline else "\n")


def region(name: str, root: Path, inline: bool = False) -> str:
    """Region `name`'s body generated from `root`: its template with the slots filled."""
    return fill(TEMPLATES.get(name, name), inline, **REGIONS[name](root))


def regenerate(
    text: str, root: Path, where: str = "", placeholder: bool = False
) -> tuple[str, list[str]]:
    """`text` with every region rewritten from `root`, and the regions it could not fill: left
    as they were, or with `placeholder` (a partial run's copy) replaced by a line saying so."""
    missing: list[str] = []

    def sub(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in REGIONS:
            raise KeyError(f"{where}: unknown region results:{name}")
        inline = not m.group(1).endswith("\n")
        try:
            body = region(name, root, inline)
        except MissingFile as e:
            missing.append(f"{name} (no {e})")
        except (KeyError, StopIteration, TypeError, ValueError, ZeroDivisionError) as e:
            # A partial run's files lack what the region quotes (a build, a variant).
            missing.append(f"{name} (the files lack what it quotes: {type(e).__name__} {e})")
        else:
            return m.group(1) + body + m.group(4)
        hole = fill("_hole", inline, why=missing[-1]) if placeholder else m.group("body")
        return m.group(1) + hole + m.group(4)

    return REGION.sub(sub, text), missing


def regions(text: str) -> dict[str, str]:
    return {m.group("name"): m.group("body") for m in REGION.finditer(text)}


def differing(text: str, root: Path, where: str = "") -> tuple[list[str], list[str]]:
    """The regions of `text` that differ from what `root` generates, and those it could not."""
    new, missing = regenerate(text, root, where)
    old_r, new_r = regions(text), regions(new)
    return [name for name in old_r if old_r[name] != new_r[name]], missing

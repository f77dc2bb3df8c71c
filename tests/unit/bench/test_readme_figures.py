"""Every figure README.md and results/README.md quote from a results file sits in a
generated region (bench.readme_figures); regenerated from the committed results files,
the committed READMEs come out unchanged, and a hand-edited figure is caught."""

from __future__ import annotations

import re

import pytest

from bench import outdir
from bench import readme_figures as rf


@pytest.mark.parametrize("rel", list(rf.READMES))
def test_committed_readme_regions_match_their_results_files(rel: str) -> None:
    text = rf.READMES[rel].read_text()
    new, missing = rf.regenerate(text, outdir.RESULTS, rel)
    # A raw archive too large to commit (bench.rawstore) is absent from a fresh clone: the
    # regions it feeds are left as they were, named in the skip below; nothing else may miss.
    absent = [m for m in missing if "raw.tar.xz: not in this tree" in m]
    assert [m for m in missing if m not in absent] == []
    old_r, new_r = rf.regions(text), rf.regions(new)
    differ = [name for name in old_r if old_r[name] != new_r[name]]
    assert differ == [], f"{rel}: regions {differ} differ from results/ (make readme-figures)"
    if absent:
        pytest.skip(f"{rel}: not checked, their raw files missing: {'; '.join(absent)}")


def test_a_hand_edited_figure_is_caught() -> None:
    text = rf.READMES["results/README.md"].read_text()
    body = rf.regions(text)["tier-scaling"]
    figure = re.search(r"\| 1 \| (\d+) ", body)
    assert figure is not None
    edited = text.replace(figure.group(0), f"| 1 | {int(figure.group(1)) + 1} ", 1)
    new, _ = rf.regenerate(edited, outdir.RESULTS)
    assert rf.regions(new)["tier-scaling"] == body != rf.regions(edited)["tier-scaling"]


def test_every_region_is_known_and_every_generator_is_used() -> None:
    used = set()
    for rel, path in rf.READMES.items():
        names = rf.regions(path.read_text())
        assert set(names) <= set(rf.REGIONS), rel
        used |= set(names)
    assert used == set(rf.REGIONS)
    with pytest.raises(KeyError, match="unknown region"):
        rf.regenerate("<!-- results:nope -->\nx\n<!-- /results:nope -->\n", outdir.RESULTS)


def test_verdicts_name_what_decided_them() -> None:
    body = rf.regions(rf.READMES["README.md"].read_text())["verdicts"]
    lines = [ln for ln in body.splitlines() if ln.startswith("* ")]
    assert lines and all("Decided by `make bench`" in ln for ln in lines)


def test_files_without_provenance_are_marked_not_recorded() -> None:
    assert "not recorded" in rf.describe_file({"when": "x", "builds": {}})
    assert "not recorded" in rf.describe_file({"standard": {"exactness": []}})
    partial = rf.describe_file({"provenance": {"when": "w", "commit": "c" * 40, "bmv2": {}}})
    assert partial.startswith("partial") and "not recorded" in partial


def test_the_full_profile_is_quoted_once_its_plan_is_complete(tmp_path) -> None:
    full = tmp_path / "experiments-full"
    (full / "raw" / "a").mkdir(parents=True)
    (full / "meta.json").write_text('{"runs_planned": 2}')
    (full / "raw" / "a" / "run.json").write_text("{}")
    assert rf.experiments_dir(tmp_path) == tmp_path / "experiments"
    (full / "raw" / "b").mkdir()
    (full / "raw" / "b" / "run.json").write_text("{}")
    assert rf.experiments_dir(tmp_path) == full


def test_a_verdict_that_changes_between_the_profiles_is_named(monkeypatch, tmp_path) -> None:
    from bench.experiments import report

    def block(verdict: str) -> str:
        return (
            "### Claimed / found\n\n"
            "| claim | found | verdict | test | decided by |\n|---|---|---|---|---|\n"
            f"| 001: rr below iphash | rr 28 ms | {verdict} | t | `make bench` (k6) |\n"
            "| 000: weights followed | 20 % | reproduced | t | `make bench` (clients) |\n"
        )

    blocks = {"experiments": block("not reproduced"), "experiments-full": block("reproduced")}
    monkeypatch.setattr(report, "readme_block", lambda where: blocks[where.name])
    monkeypatch.setattr(rf, "experiments_dir", lambda root: root / "experiments-full")
    text = rf.profiles_compared(tmp_path)
    assert text.startswith("Verdicts that changed from the quick profile to the full one: 001: rr")
    assert (
        "| 001: rr below iphash | **not reproduced** (rr 28 ms) | **reproduced** (rr 28 ms) |"
        in text
    )
    assert "000: weights followed" not in text.splitlines()[0]
    blocks["experiments"] = block("reproduced")
    assert rf.profiles_compared(tmp_path).splitlines()[0].endswith("full one: none.")

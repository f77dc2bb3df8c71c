"""Every figure README.md and results/README.md quote from a results file sits in a
generated region (bench.readme_figures); regenerated from the committed results files,
the committed READMEs come out unchanged, and a hand-edited figure is caught."""

from __future__ import annotations

import json
import re

import pytest

from bench import outdir, templates
from bench import readme_figures as rf
from bench.readme_figures import experiments as ex
from bench.readme_figures.__main__ import main
from bench.readme_figures.provenance_table import describe_file


@pytest.mark.parametrize("rel", list(rf.READMES))
def test_committed_readme_regions_match_their_results_files(rel: str) -> None:
    text = rf.READMES[rel].read_text()
    differ, missing = rf.differing(text, outdir.RESULTS, rel)  # what --check runs
    # A raw archive too large to commit (bench.rawstore) is absent from a fresh clone: the
    # regions it feeds are left as they were, named in the skip below; nothing else may miss.
    absent = [m for m in missing if "raw.tar.xz: not in this tree" in m]
    assert [m for m in missing if m not in absent] == []
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
    own = {p.stem for p in (templates.HERE / "regions").glob("[!_]*.md")}
    assert own == set(rf.REGIONS) - set(rf.TEMPLATES)  # a template each, every template used
    with pytest.raises(KeyError, match="unknown region"):
        rf.regenerate("<!-- results:nope -->\nx\n<!-- /results:nope -->\n", outdir.RESULTS)


def test_verdicts_name_what_decided_them() -> None:
    body = rf.regions(rf.READMES["README.md"].read_text())["verdicts"]
    lines = [ln for ln in body.splitlines() if ln.startswith("* ")]
    assert lines and all("Decided by `make bench`" in ln for ln in lines)


def test_files_without_provenance_are_marked_not_recorded() -> None:
    assert "not recorded" in describe_file({"when": "x", "builds": {}})
    assert "not recorded" in describe_file({"standard": {"exactness": []}})
    partial = describe_file({"provenance": {"when": "w", "commit": "c" * 40, "bmv2": {}}})
    assert partial.startswith("partial") and "not recorded" in partial


def test_the_full_profile_is_quoted_once_its_plan_is_complete(tmp_path) -> None:
    full = tmp_path / "experiments-full"
    (full / "raw" / "a").mkdir(parents=True)
    (full / "meta.json").write_text('{"runs_planned": 2}')
    (full / "raw" / "a" / "run.json").write_text("{}")
    assert ex.experiments_dir(tmp_path) == tmp_path / "experiments"
    (full / "raw" / "b").mkdir()
    (full / "raw" / "b" / "run.json").write_text("{}")
    assert ex.experiments_dir(tmp_path) == full


def test_a_verdict_that_changes_between_the_profiles_is_named(monkeypatch, tmp_path) -> None:
    from bench.experiments import report

    def block(verdict: str) -> report.Block:
        return report.Block(
            "",
            [
                report.Claim("001: rr below iphash", "rr 28 ms", verdict, "t", "`make bench` (k6)"),
                report.Claim("000: weights followed", "20 %", "reproduced", "t", "`make bench`"),
            ],
        )

    blocks = {"experiments": block("not reproduced"), "experiments-full": block("reproduced")}
    monkeypatch.setattr(ex, "_block", lambda where: blocks[where.name])
    monkeypatch.setattr(ex, "experiments_dir", lambda root: root / "experiments-full")
    text = rf.region("profiles-compared", tmp_path)
    assert text.startswith("Verdicts that changed from the quick profile to the full one: 001: rr")
    assert (
        "| 001: rr below iphash | **not reproduced** (rr 28 ms) | **reproduced** (rr 28 ms) |"
        in text
    )
    assert "000: weights followed" not in text.splitlines()[0]
    blocks["experiments"] = block("reproduced")
    assert rf.region("profiles-compared", tmp_path).splitlines()[0].endswith("full one: none.")


def _overload_tier(tmp_path, overload: dict | None):
    doc = {"reps": 2, "failover": {}, "scaling": {}}
    if overload is not None:
        doc["overload"] = overload
    (tmp_path / "tier").mkdir()
    (tmp_path / "tier" / "tier.json").write_text(json.dumps(doc))
    return tmp_path


def _point(served: list[float], below: float, stall: float, failed: int) -> dict:
    runs = [
        {
            "concurrency": [64, 64, 64],
            "offered_rps": 9600.0,
            "seconds": 60.2,
            "held": 120,
            "held_timed_out": 1,
        }
        for _ in served
    ]
    s = {"median": sorted(served)[len(served) // 2], "min": min(served), "max": max(served)}
    zero = {"median": 0.0, "min": 0.0, "max": 0.0}
    return {
        "runs": runs,
        "served_rps": s,
        "r0_s_below_n": {"median": below, "min": below, "max": below},
        "r0_s_none": zero,
        "r1_s_none": zero,
        "longest_stall_s": {"median": stall, "min": stall, "max": stall},
        "failed": failed,
        "held_broken": 0,
    }


def test_the_overload_region_quotes_each_point_and_the_baseline(tmp_path) -> None:
    root = _overload_tier(
        tmp_path,
        {
            "balancers": 3,
            "capacity_rps": 640.4,
            "unloaded_ms_per_request": 5.04,
            "points": {"3 x ab -c 64": _point([631.6, 600.2, 650.9], 0.44, 2.346, 3)},
        },
    )
    text = rf.region("tier-overload", root)
    row = next(ln for ln in text.splitlines() if ln.startswith("| 3 x ab -c 64 "))
    # offered 9,600 req/s is 15.0 x the capacity; served median 632 (600–651), rounded
    assert "| 9,600 (15.0 x capacity) | 632 (600–651) | 3 |" in row
    assert "| 0.44 (0.44–0.44) |" in row and "| 2.35 (2.35–2.35) |" in row
    assert row.endswith("| 0 / 3 of 360 |")  # broken / timed out of the held, every rep
    assert "below 3 of 3 next hops" in text and "640 req/s" in text and "5.0 ms" in text
    assert "56 of 60 s" in text and "quoted" in text  # the baseline from before, said so


def test_the_overload_region_says_not_measured_without_the_section(tmp_path) -> None:
    text = rf.region("tier-overload", _overload_tier(tmp_path, None))
    assert text.count("\n") == 1 and "not measured yet" in text


def test_check_names_each_region_that_drifted_and_changes_nothing(monkeypatch, tmp_path, capsys):
    text = rf.READMES["docs/tier.md"].read_text()
    body = rf.regions(text)["tier-summary"]
    edited = tmp_path / "tier.md"
    edited.write_text(text.replace(body, body.replace("Measured", "Measured by hand", 1)))
    before = edited.read_text()
    monkeypatch.setattr(rf, "READMES", {"docs/tier.md": edited})
    assert main(["--check"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"readme-figures: docs/tier.md: region tier-summary differs from {outdir.RESULTS}"
    ]
    assert edited.read_text() == before
    edited.write_text(text)
    assert main(["--check"]) == 0

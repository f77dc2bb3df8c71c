"""The computed algorithm figures (bench.algorithms, bench.maglev): shares and moved fractions
of tiny cases worked out by hand, the pages' verdict sentences, the JSON rounding, and the
command line writing only what --only asks for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import algorithms, maglev, outdir, results
from p4lb.models.leastconn import POLICIES


def test_shares_count_table_entries_and_picked_entries_per_backend() -> None:
    # Entries 0..4 hold backends 0 1 1 0 2; the picks land on entries 0, 1, 4, 4.
    table, picks = (0, 1, 1, 0, 2), [0, 1, 4, 4]
    assert maglev.shares(table, picks, 3) == ([0.4, 0.4, 0.2], [0.25, 0.25, 0.5])


def test_srchash_table_share_is_the_largest_remainder_split_of_the_maglev_size() -> None:
    # 3 backends: size 509. 509 x (1, 2, 3) / 6 = 84.83, 169.67, 254.5: floors 84, 169, 254
    # (507), the two entries left go to the largest remainders (backends 0 and 1).
    (row,) = maglev.share_rows({"1:2:3": (1, 2, 3)}, [0], ["10.0.0.1"])
    assert row["table_size"] == 509
    assert row["weight_share"] == pytest.approx([1 / 6, 1 / 3, 1 / 2])
    assert row["srchash_table_share"] == pytest.approx([85 / 509, 170 / 509, 254 / 509])
    assert row["max_abs_error"]["srchash_table"] == pytest.approx(1 / 1018)  # 254/509 - 1/2
    # Maglev fills every entry, each backend within one entry of its weight's share.
    assert sum(row["maglev_table_share"]) == pytest.approx(1)
    assert row["max_abs_error"]["maglev_table"] <= 1 / 509


def test_removed_backends_are_all_of_a_small_pool_else_evenly_spaced() -> None:
    assert maglev.removed(3) == [0, 1, 2]
    assert maglev.removed(8) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert maglev.removed(16) == [0, 2, 4, 6, 9, 11, 13, 15]  # round(k * 15 / 7)
    assert maglev.removed(64) == [0, 9, 18, 27, 36, 45, 54, 63]


def test_moved_fractions_of_three_backends_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(maglev, "DISRUPTION_N", (3,))
    monkeypatch.setattr(maglev, "SIZES", {"maglev_max": 7, "maglev_reference": 11})
    (row,) = maglev.disruption(list(range(6)))
    assert row["removed_backends"] == 3
    assert (row["ideal_remove"], row["ideal_add"]) == (pytest.approx(1 / 3), 0.25)
    # Keys 0..5 mod 3: b0 b1 b2 b0 b1 b2. Without b0, mod 2 over (b1, b2): b1 b2 b1 b2 b1 b2,
    # 4 of 6 moved; without b1 or b2 likewise 4 of 6. Adding a fourth, mod 4:
    # b0 b1 b2 new b0 b1: keys 3, 4, 5 moved.
    assert row["modulo"] == pytest.approx({"remove_mean": 2 / 3, "remove_max": 2 / 3, "add": 0.5})
    # p4lb's update moves exactly the removed backend's entries: over all three removals
    # they add up to the whole table, so the mean is 1/3.
    up = row["p4lb_update"]
    assert up["table_size"] == 509
    assert up["remove_mean"] == pytest.approx(1 / 3)
    assert up["remove_vs_ideal"] == pytest.approx(1)
    # ... and an addition only the new backend's count: 509 / 4 = 127.25, within one entry.
    assert round(up["add"] * 509) in (127, 128)
    # Plain Maglev moves at least that much; the sizes asked for are the ones used.
    assert row["maglev_ladder"]["remove_mean"] >= up["remove_mean"] - 1e-12
    sizes = [row[t]["table_size"] for t in ("maglev_ladder", "maglev_max", "maglev_reference")]
    assert sizes == [509, 7, 11]


def fake_row(n: int, update: tuple[float, float], ladder: tuple[float, float], top: float) -> Any:
    """A disruption row: each Maglev variant's (remove, add) against the ideal."""

    def d(remove: float, add: float) -> dict[str, Any]:
        return {
            "table_size": 509,
            "remove_mean": remove / n,
            "remove_vs_ideal": remove,
            "add": add / (n + 1),
            "add_vs_ideal": add,
        }

    return {
        "n": n,
        "ideal_remove": 1 / n,
        "ideal_add": 1 / (n + 1),
        "modulo": {"remove_mean": (n - 1) / n, "add": n / (n + 1)},
        "p4lb_update": d(*update),
        "maglev_ladder": d(*ladder),
        "maglev_max": d(top, top),
        "maglev_reference": d(1, 1),
    }


def test_maglev_page_says_which_sizes_meet_the_goal() -> None:
    disr = [
        fake_row(3, (1.0, 0.998), (1.02, 1.04), 1.001),
        fake_row(8, (1.0, 0.996), (1.16, 1.15), 1.06),
    ]
    page = algorithms.maglev_page([], disr)
    assert "Computed by `python -m bench.algorithms` (deterministic" in page
    assert "**p4lb's maglev: met at every N (worst 1.000x)**" in page
    assert "meets the goal for N=3 at >=100N, N=3 at 65521; not otherwise." in page
    assert "| 3 | 33.33 % | 66.67 % | **33.33 % = 1.000x** | 34.00 % = 1.020x (509) |" in page

    worse = [fake_row(8, (1.2, 1.0), (1.16, 1.15), 1.06)]
    page = algorithms.maglev_page([], worse)
    assert "**p4lb's maglev: not met at every N (worst 1.200x)**" in page
    assert "Plain Maglev for comparison: not met at any deployable size." in page


def test_leastconn_page_gives_each_policy_against_argmin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(algorithms, "WEIGHTS", {"1:3": (1, 3)})
    mean = {"argmin": (1.0, 2.0), "exact": (1.0, 1.98), "p2c_pairs": (1.1, 2.4)}
    mean |= {"p2c_weighted": (1.2, 2.2), "p2c": (1.5, 2.0)}
    rows = [
        {"weights": "1:3", "mean_active_per_backend": per, "policy": policy}
        | {"max_over_mean": mean.get(policy, (1.3, 2.6))[i], "max_over_mean_p99": 2.0}
        | {"jain": 0.99, "shares": [0.25, 0.75], "weight_share": [0.25, 0.75]}
        for i, per in enumerate(algorithms.PER_BACKEND)
        for policy in POLICIES
    ]
    page = algorithms.leastconn_page(rows)
    assert "| 1:3 | 4 | argmin | 1.000 | 2.000 | 0.9900 | 25.0 75.0 (25.0 75.0) |" in page
    assert "p4lb's exact choice: max/mean 0.99-1.00 x argmin's" in page
    assert "p4lb's pairs: max/mean within 1.10-1.20 x the exact argmin's." in page
    assert "weighted candidates: 1.10-1.20 x (two draws" in page
    assert "\n1.00-1.50 x, and with skewed weights" in page


def test_json_floats_are_rounded_to_six_places_and_ints_stay_ints(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    algorithms.write_json(path, {"a": 0.1234567891, "b": [1, 2.0000004], "c": (3, 4)})
    assert path.read_text() == (
        '{\n "a": 0.123457,\n "b": [\n  1,\n  2.0\n ],\n "c": [\n  3,\n  4\n ]\n}\n'
    )


def test_only_leastconn_writes_its_two_files_naming_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(algorithms, "WEIGHTS", {"1:2": (1, 2)})
    monkeypatch.setattr(algorithms, "ARRIVALS", 400)
    assert algorithms.main(["--out", str(tmp_path), "--only", "leastconn"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["leastconn.json", "leastconn.md"]
    doc = json.loads((tmp_path / "leastconn.json").read_text())
    assert doc["meta"]["command"] == "python -m bench.algorithms"
    assert doc["meta"]["provenance"]["command"] == (
        f"python -m bench.algorithms --out {tmp_path} --only leastconn"
    )
    assert (doc["meta"]["arrivals"], doc["meta"]["per_backend"]) == (400, [4, 64])
    assert len(doc["runs"]) == len(POLICIES) * 2
    page = (tmp_path / "leastconn.md").read_text()
    assert "Computed by `python -m bench.algorithms` with" in page
    assert "400 connections per case" in page


def test_only_maglev_writes_a_png_without_the_matplotlib_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(algorithms, "WEIGHTS", {"equal x3": (1, 1, 1)})
    monkeypatch.setattr(maglev, "FLOWS", 300)
    monkeypatch.setattr(maglev, "DISRUPTION_N", (3, 8))
    monkeypatch.setattr(maglev, "SIZES", {"maglev_max": 1021, "maglev_reference": 2039})
    assert algorithms.main(["--only", "maglev", "--out", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["maglev.json", "maglev.md", "maglev.png"]
    png = (tmp_path / "maglev.png").read_bytes()
    assert png.startswith(b"\x89PNG") and b"Software" not in png  # same bytes on any version
    doc = json.loads((tmp_path / "maglev.json").read_text())
    assert [r["n"] for r in doc["disruption"]] == [3, 8]
    assert doc["meta"]["flows"] == 300


def test_make_results_computes_them_with_this_module() -> None:
    step = next(
        s for s in results.plan("quick", outdir.SCRATCH, {}, "py") if s.name == "algorithms"
    )
    assert step.argv == ["py", "-m", "bench.algorithms"] and not step.switch

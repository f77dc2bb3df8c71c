"""bench.rawstore: raw files packed into one archive, read back from it or from raw/."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bench import rawstore

RUNS = {
    "raw/ab/equal/wrr/n300-c1/r0/run.json": b'{"experiment": "ab"}',
    "raw/ab/equal/wrr/n300-c1/r0/ab.txt": b"Requests per second: 100\n",
    "raw/ab/equal/wrr/n300-c1/r1/run.json": b'{"experiment": "ab", "rep": 1}',
    "raw/ab/equal/wrr/n300-c1/r1/ab.txt": b"Requests per second: 120 and a longer report\n",
    "raw/k6/equal/wrr/average/r0/run.json": b'{"experiment": "k6"}',
    "raw/k6/equal/wrr/average/r0/k6-h1.csv.gz": bytes(range(256)),
}


def run_dir(tmp_path: Path, files: dict[str, bytes] = RUNS) -> Path:
    root = tmp_path / "experiments"
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / "meta.json").write_text(json.dumps({"profile": "full", "runs_planned": 3}, indent=1))
    return root


def files_under(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in d.rglob("*") if p.is_file()}


def test_packed_files_read_back_from_the_archive_as_they_were(tmp_path) -> None:
    root = run_dir(tmp_path)
    rec = rawstore.pack(root)
    meta = json.loads((root / "meta.json").read_text())
    assert not (root / "raw").exists()
    assert meta["profile"] == "full" and meta["runs_planned"] == 3  # earlier fields kept
    assert meta["raw_archive"] == rec
    assert rec["sha256"] == rawstore.sha256(root / "raw.tar.xz")
    assert rec["bytes"] == (root / "raw.tar.xz").stat().st_size
    assert (rec["files"], rec["runs"]) == (6, 3)
    raw = rawstore.raw_dir(root)
    assert raw is not None and raw != root / "raw"
    assert files_under(raw) == {k.removeprefix("raw/"): v for k, v in RUNS.items()}
    assert [p.parent.name for p in rawstore.run_files(root)] == ["r0", "r1", "r0"]
    assert rawstore.run_count(root) == 3


def test_unpack_restores_raw_and_drops_the_record(tmp_path) -> None:
    root = run_dir(tmp_path)
    rawstore.pack(root)
    rawstore.unpack(root)
    assert files_under(root / "raw") == {k.removeprefix("raw/"): v for k, v in RUNS.items()}
    assert not (root / "raw.tar.xz").exists()
    assert "raw_archive" not in json.loads((root / "meta.json").read_text())


def test_the_same_files_give_the_same_archive(tmp_path) -> None:
    a, b = run_dir(tmp_path / "a"), run_dir(tmp_path / "b")
    for p in (b / "raw").rglob("*"):
        os.utime(p, (1_000_000, 1_000_000))
        p.chmod(0o755 if p.is_dir() else 0o600)
    assert rawstore.pack(a)["sha256"] == rawstore.pack(b)["sha256"]


def test_the_sample_is_the_smallest_run_of_each_experiment(tmp_path) -> None:
    root = run_dir(tmp_path)
    rawstore.pack(root)
    sample = root / "raw-sample"
    assert sorted(p.relative_to(sample).as_posix() for p in sample.rglob("*.json")) == [
        "ab/equal/wrr/n300-c1/r0/run.json",
        "k6/equal/wrr/average/r0/run.json",
    ]
    assert "`ab/equal/wrr/n300-c1/r0/`" in (sample / "README.md").read_text()


def test_a_changed_archive_is_refused_in_one_line(tmp_path, capsys) -> None:
    from bench.experiments import report

    root = run_dir(tmp_path)
    rawstore.pack(root)
    data = bytearray((root / "raw.tar.xz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (root / "raw.tar.xz").write_bytes(bytes(data))
    with pytest.raises(rawstore.RawError, match="does not match meta.json"):
        rawstore.raw_dir(root)
    assert report.main(["--out", str(root)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not match meta.json" in err and "Traceback" not in err
    assert rawstore.main(["check", str(root)]) == 1
    assert capsys.readouterr().err.count("\n") == 1


def test_a_recorded_archive_not_in_the_tree_says_how_to_get_it(tmp_path) -> None:
    root = run_dir(tmp_path)
    rawstore.pack(root)
    meta = json.loads((root / "meta.json").read_text())
    meta["raw_archive"]["git_commit"] = "0123456789" * 4
    (root / "meta.json").write_text(json.dumps(meta))
    (root / "raw.tar.xz").unlink()
    with pytest.raises(rawstore.RawError, match="restore .* from commit 0123456789"):
        rawstore.run_files(root)
    assert rawstore.run_count(root) == 3  # the record still says how many runs it holds
    assert rawstore.has_raw(root)


def test_the_directory_is_read_before_the_archive(tmp_path) -> None:
    root = run_dir(tmp_path)
    rawstore.pack(root)
    (root / "raw" / "only-here" / "r0").mkdir(parents=True)
    (root / "raw" / "only-here" / "r0" / "run.json").write_text("{}")
    assert rawstore.raw_dir(root) == root / "raw"
    assert rawstore.run_files(root) == [root / "raw" / "only-here" / "r0" / "run.json"]
    assert rawstore.run_count(root) == 1
    (root / "raw" / "only-here" / "r0" / "run.json").unlink()
    (root / "raw" / "only-here" / "r0").rmdir()
    (root / "raw" / "only-here").rmdir()
    (root / "raw").rmdir()
    assert len(rawstore.run_files(root)) == 3  # now from the archive


def test_no_raw_files_at_all_is_no_runs(tmp_path) -> None:
    (tmp_path / "meta.json").write_text("{}")
    assert rawstore.raw_dir(tmp_path) is None
    assert rawstore.run_files(tmp_path) == [] and rawstore.run_count(tmp_path) == 0


def test_restore_rebuilds_the_recorded_archive_from_git(tmp_path) -> None:
    env = os.environ | {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    root = run_dir(tmp_path)
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "raw"]):
        subprocess.run(["git", "-C", str(tmp_path), *cmd], check=True, env=env)
    rec = rawstore.pack(root, "HEAD")
    head = subprocess.check_output(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], text=True)
    assert rec["git_commit"] == head.strip()
    (root / "raw.tar.xz").unlink()
    assert rawstore.main(["restore", str(root)]) == 0
    assert rawstore.sha256(root / "raw.tar.xz") == rec["sha256"]
    assert files_under(rawstore.raw_dir(root) or root) == {
        k.removeprefix("raw/"): v for k, v in RUNS.items()
    }

"""A run directory's raw files: raw/ while a run writes them, then one archive, raw.tar.xz,
whose SHA-256 and size meta.json records under `raw_archive`.

Every reader of raw files goes through raw_dir(): the directory when it is there, else the
archive, checked against meta.json and unpacked once per process into a temporary
directory. The archive is built the same way from the same files every time (names
sorted, times, owners and modes fixed), so one rebuilt from the git history that still
holds the files has the recorded checksum. An archive over COMMIT_LIMIT is not committed:
meta.json keeps its checksum and the commit it can be rebuilt from.

    python -m bench.rawstore pack ROOT [--from-git COMMIT]   raw/ (or COMMIT's) -> raw.tar.xz
    python -m bench.rawstore unpack ROOT                      raw.tar.xz -> raw/
    python -m bench.rawstore check ROOT                       the archive against meta.json
    python -m bench.rawstore restore ROOT                     rebuild it from the git history
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from bench import outdir

ARCHIVE = "raw.tar.xz"
KEY = "raw_archive"  # meta.json's record of the archive
SAMPLE = "raw-sample"  # one run of each experiment, unpacked, committed beside the archive
COMMIT_LIMIT = 5_000_000  # bytes: a larger archive stays out of git, its checksum in
XZ_PRESET = 9  # a 64 MiB dictionary: the full profile's tar (~48 MB) fits in one window


class RawError(Exception):
    """Raw files that cannot be read as recorded; the message is one line."""


# ---------------------------------------------------------------- the archive


def write_archive(members: Iterable[tuple[str, bytes]], dest: Path) -> None:
    """(name, content) `members` as a tar.xz at `dest`, sorted, every header fixed (the same
    files always give the same bytes)."""
    tmp = dest.with_name(dest.name + ".tmp")
    with tarfile.open(tmp, "w:xz", preset=XZ_PRESET, format=tarfile.PAX_FORMAT) as tar:
        for name, data in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(dest)


def dir_members(root: Path) -> list[tuple[str, bytes]]:
    """(raw/relative path, content) of every file under root/raw."""
    raw = root / "raw"
    return [
        (f"raw/{p.relative_to(raw).as_posix()}", p.read_bytes())
        for p in sorted(raw.rglob("*"))
        if p.is_file()
    ]


def git_members(root: Path, commit: str) -> list[tuple[str, bytes]]:
    """(raw/relative path, content) of every file under root/raw at `commit`."""
    top = Path(git(root, "rev-parse", "--show-toplevel").decode().strip())
    where = (root.resolve().relative_to(top.resolve()) / "raw").as_posix()
    tar_bytes = git(top, "archive", "--format=tar", commit, "--", where)
    prefix = where + "/"
    out = []
    with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as tar:
        for m in tar:
            if m.isfile() and m.name.startswith(prefix):
                data = tar.extractfile(m).read()  # type: ignore[union-attr]
                out.append(("raw/" + m.name[len(prefix) :], data))
    if not out:
        raise RawError(f"{root}: no files under raw/ at commit {commit}")
    return out


def git(root: Path, *args: str) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        err = getattr(e, "stderr", b"") or b""
        raise RawError(f"git {' '.join(args[:2])}: {err.decode().strip() or e}") from None
    return done.stdout


def sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


# ---------------------------------------------------------------- meta.json


def read_meta(root: Path) -> dict[str, Any]:
    p = root / "meta.json"
    return json.loads(p.read_text()) if p.exists() else {}


def write_meta(root: Path, meta: dict[str, Any]) -> None:
    (root / "meta.json").write_text(json.dumps(meta, indent=1))


def record(root: Path) -> dict[str, Any] | None:
    """meta.json's record of the archive, if any."""
    rec = read_meta(root).get(KEY)
    return rec if isinstance(rec, dict) else None


# ---------------------------------------------------------------- writing


def pack(root: Path, commit: str | None = None) -> dict[str, Any]:
    """root/raw (or its files at `commit`) into root/raw.tar.xz, recorded in meta.json; the
    sample refreshed and raw/ removed. Returns the record."""
    members = git_members(root, commit) if commit else dir_members(root)
    if not members:
        raise RawError(f"{root / 'raw'}: no files to pack")
    write_archive(members, root / ARCHIVE)
    rec: dict[str, Any] = {
        "file": ARCHIVE,
        "sha256": sha256(root / ARCHIVE),
        "bytes": (root / ARCHIVE).stat().st_size,
        "files": len(members),
        "runs": sum(1 for name, _ in members if PurePosixPath(name).name == "run.json"),
        "unpacked_bytes": sum(len(d) for _, d in members),
    }
    if commit:
        rec["git_commit"] = git(root, "rev-parse", commit).decode().strip()
    write_sample(root, members, rec)
    meta = read_meta(root)
    meta[KEY] = rec
    write_meta(root, meta)
    shutil.rmtree(root / "raw", ignore_errors=True)
    return rec


def write_sample(root: Path, members: list[tuple[str, bytes]], rec: dict[str, Any]) -> None:
    """root/raw-sample/: the smallest run of each experiment, unpacked, and a README line."""
    runs: dict[str, dict[str, bytes]] = {}
    for name, data in members:
        parts = PurePosixPath(name).parts  # raw, experiment, scenario, variant, load, rK, file
        if len(parts) == 7:
            runs.setdefault("/".join(parts[1:6]), {})[parts[6]] = data
    chosen: dict[str, str] = {}
    for run in sorted(runs, key=lambda r: (sum(map(len, runs[r].values())), r)):
        chosen.setdefault(run.split("/", 1)[0], run)
    sample = root / SAMPLE
    shutil.rmtree(sample, ignore_errors=True)
    for run in chosen.values():
        for file, data in runs[run].items():
            (sample / run).mkdir(parents=True, exist_ok=True)
            (sample / run / file).write_bytes(data)
    where = (
        f"`{ARCHIVE}` beside this directory"
        if rec["bytes"] <= COMMIT_LIMIT
        else f"`{ARCHIVE}`, not committed ({rec['bytes'] / 1e6:.1f} MB; "
        f"`python -m bench.rawstore restore {shown(root)}` rebuilds it from the git history)"
    )
    (sample / "README.md").write_text(
        f"One run of each experiment, the smallest, unpacked as a sample: "
        f"{', '.join(f'`{r}/`' for r in sorted(chosen.values()))}. "
        f"All {rec['runs']} runs ({rec['files']} files): {where}; its SHA-256 and size are in "
        f"`../meta.json` under `{KEY}`.\n"
    )


def shown(root: Path) -> str:
    """root as a reader types it: relative to the repository when inside it."""
    try:
        return root.resolve().relative_to(outdir.ROOT).as_posix()
    except ValueError:
        return str(root)


# ---------------------------------------------------------------- reading


def verified(root: Path) -> Path:
    """root/raw.tar.xz once its SHA-256 matches meta.json's record."""
    rec = record(root)
    path = root / ARCHIVE
    if rec is None:
        raise RawError(f"{path}: meta.json records no checksum for it ({KEY})")
    if not path.exists():
        how = (
            f"python -m bench.rawstore restore {shown(root)} rebuilds it from commit "
            f"{rec['git_commit'][:10]}"
            if rec.get("git_commit")
            else "it was not committed"
        )
        raise RawError(f"{path}: not in this tree (sha256 {rec['sha256'][:16]}…): {how}")
    found = sha256(path)
    if found != rec["sha256"]:
        raise RawError(
            f"{path}: sha256 {found[:16]}… does not match meta.json's {rec['sha256'][:16]}… "
            "(the archive changed or is cut short)"
        )
    return path


def extract(archive: Path, dest: Path) -> None:
    """The files of `archive` under `dest`; a name leaving `dest` is refused."""
    with tarfile.open(archive, "r:xz") as tar:
        try:
            tar.extractall(dest, filter="data")
        except tarfile.FilterError as e:
            raise RawError(f"{archive}: unsafe member: {e}") from None


_UNPACKED: dict[tuple[str, str], Path] = {}


def raw_dir(root: Path) -> Path | None:
    """Where root's raw files can be read: root/raw, else the checked archive unpacked once per
    process into a temporary directory; None when root has neither."""
    if (root / "raw").is_dir():
        return root / "raw"
    if not (root / ARCHIVE).exists() and record(root) is None:
        return None
    archive = verified(root)
    key = (str(archive.resolve()), sha256(archive))
    if key not in _UNPACKED:
        tmp = Path(tempfile.mkdtemp(prefix="p4lb-raw-"))
        atexit.register(shutil.rmtree, tmp, True)
        extract(archive, tmp)
        _UNPACKED[key] = tmp / "raw"
    return _UNPACKED[key]


def run_files(root: Path) -> list[Path]:
    """Every run's run.json under root's raw files (directory or archive), sorted."""
    raw = raw_dir(root)
    return sorted(raw.glob("**/run.json")) if raw else []


def run_count(root: Path) -> int:
    """Runs recorded under root: run.json files in raw/, else the archive's record."""
    if (root / "raw").is_dir():
        return len(list((root / "raw").glob("**/run.json")))
    return int((record(root) or {}).get("runs", 0))


def has_raw(root: Path) -> bool:
    """Whether root holds raw files: raw/ or a recorded archive (present or not)."""
    return (root / "raw").is_dir() or record(root) is not None


def unpack(root: Path) -> Path:
    """root/raw from the checked archive (for --resume), the archive and its record removed."""
    archive = verified(root)
    extract(archive, root)
    archive.unlink()
    meta = read_meta(root)
    meta.pop(KEY, None)
    write_meta(root, meta)
    return root / "raw"


def restore(root: Path) -> Path:
    """root/raw.tar.xz rebuilt from the commit meta.json names, checked against its record."""
    rec = record(root)
    if rec is None or not rec.get("git_commit"):
        raise RawError(f"{root / 'meta.json'}: no {KEY}.git_commit to rebuild the archive from")
    dest = root / ARCHIVE
    write_archive(git_members(root, rec["git_commit"]), dest)
    found = sha256(dest)
    if found != rec["sha256"]:
        dest.unlink()
        raise RawError(
            f"{dest}: rebuilt from {rec['git_commit'][:10]} with sha256 {found[:16]}…, "
            f"not meta.json's {rec['sha256'][:16]}… (removed)"
        )
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.rawstore", description=__doc__)
    ap.add_argument("action", choices=["pack", "unpack", "check", "restore"])
    ap.add_argument("root", type=Path, help="a run directory (meta.json, raw/ or raw.tar.xz)")
    ap.add_argument("--from-git", default=None, help="pack: the files of this commit")
    a = ap.parse_args(argv)
    root: Path = a.root
    if not (root / "meta.json").exists():
        print(f"rawstore: {root / 'meta.json'}: not found", file=sys.stderr)
        return 2
    try:
        if a.action == "pack":
            rec = pack(root, a.from_git)
            print(f"rawstore: {rec['files']} files -> {root / ARCHIVE} ({rec['bytes']} bytes)")
        elif a.action == "unpack":
            print(f"rawstore: {unpack(root)}")
        elif a.action == "check":
            print(f"rawstore: {verified(root)}: sha256 matches meta.json")
        else:
            print(f"rawstore: {restore(root)}: rebuilt, sha256 matches meta.json")
    except RawError as e:
        print(f"rawstore: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The runner a switch bench is a spec for: the command line (--build, --reps, --profile,
--order-seed, --resume, --out and the spec's own options), the builds to measure and the
tools they need, the provenance (bench.provenance), the repetitions with the variants in a
seeded shuffled order within each, resuming a run that stopped, and the JSON file.

A spec says only what the experiment is: its variants, its options and their defaults (the
full profile; bench.profiles holds the quick one), what it needs, one measure function (one
variant, one repetition: the value to keep) and how a build's values become figures."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import outdir, profiles, provenance


def progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def parse_builds(prog: str, values: list[str]) -> dict[str, str]:
    builds = {}
    for v in values:
        name, _, path = v.partition("=")
        if not path or not Path(path).exists():
            raise SystemExit(f"{prog}: --build {v!r}: want NAME=PATH to simple_switch_grpc")
        builds[name] = path
    return builds


def missing(tools: list[str] | tuple[str, ...]) -> list[str]:
    """The tools (executables on PATH, or absolute paths) this machine lacks."""
    return [t for t in tools if not (Path(t).exists() if t.startswith("/") else shutil.which(t))]


def builds_to_measure(prog: str, values: list[str], tools: list[str]) -> dict[str, str] | None:
    """The builds to measure (--build NAME=PATH; else P4LB_SIMPLE_SWITCH or the
    simple_switch_grpc on PATH, as "standard"), or None once stderr says what is missing:
    root, one of `tools`, a switch."""
    default = os.environ.get("P4LB_SIMPLE_SWITCH") or shutil.which("simple_switch_grpc")
    builds = parse_builds(prog, values) or ({"standard": default} if default else {})
    lacking = missing(tools)
    if not builds or lacking or os.geteuid() != 0:
        what = ", ".join(lacking + ([] if builds else ["simple_switch_grpc"]))
        print(f"{prog}: needs root and {what or 'nothing else'}", file=sys.stderr)
        return None
    return builds


def add_common(ap: argparse.ArgumentParser) -> None:
    """The options every bench shares: the seed of its variants' order."""
    ap.add_argument(
        "--order-seed",
        type=int,
        default=None,
        help="seed of the variants' shuffled order per repetition (default: from the clock; "
        "recorded in the results file)",
    )


def order_seed(args: argparse.Namespace) -> int:
    if args.order_seed is None:
        args.order_seed = int(time.time()) % 1_000_000
    return int(args.order_seed)


def start_run(
    prog: str, builds: dict[str, str] | None, argv: list[str] | None
) -> provenance.Run | None:
    """bench.provenance.start, or None once stderr says the machine is too busy."""
    try:
        return provenance.start(prog, builds, sys.argv if argv is None else [prog, *argv])
    except (provenance.BusyMachine, ValueError) as e:
        print(str(e), file=sys.stderr)
        return None


def machine() -> dict[str, Any]:
    """The `machine` field of the switch benches' files (bench.report reads its load
    averages); bench.provenance has the full record."""
    return {
        "cpus": os.cpu_count(),
        "loadavg_at_start": os.getloadavg(),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


@dataclass(frozen=True)
class Trial:
    """Where one measurement runs: the build, its binary, the arguments, a scratch dir and
    what the spec's lab gave (its Mininet network, say), and the repetition."""

    build: str
    binary: str
    args: argparse.Namespace
    workdir: Path
    lab: Any = None
    rep: int = 0  # the repetition (0-based) the measurement belongs to


Measure = Callable[[Trial, str], Any]  # one variant once: a JSON value


@dataclass(frozen=True)
class Spec:
    prog: str  # the make target's name: bench-choices (also its key in bench.profiles)
    doc: str  # the module's docstring: the help's first line and the file's "method"
    subdir: str  # where under results/ (or the scratch tree) it writes
    filename: str
    reps: int
    tools: tuple[str, ...]
    options: Callable[[argparse.ArgumentParser], None]
    committed: tuple[str, ...]  # options that must be at their defaults for results/
    variants: Callable[[argparse.Namespace], list[str]]
    # What one repetition measures of each variant: one function, or several passes, each
    # over all the variants in the repetition's order (floor: instructions, then rates).
    measure: Measure | Callable[[argparse.Namespace], dict[str, Measure]]
    # A build's values ({variant: [value per repetition]}, or {pass: {variant: [...]}})
    # as the figures its file keeps.
    figures: Callable[[argparse.Namespace, dict[str, Any]], dict[str, Any]]
    passes: bool = False  # `measure` takes the arguments and returns the passes by name
    head: Callable[[argparse.Namespace], dict[str, Any]] = field(default=lambda a: {})
    provenance: dict[str, Any] = field(default_factory=dict)  # facts of this bench's own
    # What every measurement runs in, opened once (default: bench.lab.veths); Trial.lab.
    lab: Callable[[argparse.Namespace], AbstractContextManager[Any]] | None = None
    # Each build's figures beside its binary and `order` (the switch files' layout), or
    # the orders under the file's own `order`.
    order_in_build: bool = False
    check: Callable[[argparse.Namespace], str | None] = field(default=lambda a: None)
    # The bench's other files (tables, notes, plots) from the results, before the runner
    # writes them (it may add fields, or take some out to files of their own); an exit status.
    write: Callable[[argparse.Namespace, dict[str, Any]], int | None] | None = None
    # What a bench that measures no switch measures instead ({name: executable}, say
    # HAProxy's): no --build and no switch; the machine needs root and `tools`.
    subject: Callable[[], dict[str, str]] | None = None


def part(prog: str, variants: Any, measure: Measure, figures: Any) -> Spec:
    """One measure of a bench that takes several in one run (bench-switch's timed figures,
    instructions and paths; bench-tier's failover, scaling and overload): its variants'
    repetitions interleaved by measure_build. The command line, the file and the
    provenance are the bench's own."""
    return Spec(
        prog=prog,
        doc="",
        subdir="",
        filename="",
        reps=0,
        tools=(),
        options=lambda ap: None,
        committed=(),
        variants=variants,
        measure=measure,
        figures=figures,
        order_in_build=True,
    )


def command_line(
    prog: str,
    doc: str,
    subdir: str,
    argv: list[str] | None,
    options: Callable[[argparse.ArgumentParser], None],
    committed: list[str],
    reps: int | None = None,
    builds: bool = False,
    profile: str | None = None,
    reps_key: str = "reps",
) -> argparse.Namespace:
    """A bench's command line: --build NAME=PATH (with `builds`), --reps (when it has a
    default), the bench's own `options`, --profile (`profile`'s quick arguments, the
    bench's own by default) and --out. Without --out the output goes to `subdir` of
    results/ for the committed profile (`committed` at their defaults, at least the default
    repetitions, `reps_key` naming them), else of the scratch tree (bench.outdir)."""
    ap = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    if builds:
        ap.add_argument("--build", action="append", default=[], help="NAME=PATH (repeatable)")
    if reps is not None:
        ap.add_argument("--reps", type=int, default=reps)
    options(ap)
    if (profile or prog) in profiles.QUICK:  # a bench without a quick profile: no --profile
        profiles.add_argument(ap)
        argv = profiles.expand(profile or prog, argv)
    default = outdir.RESULTS / subdir
    ap.add_argument("--out", type=Path, default=None, help=f"default: {default} or the scratch")
    args = ap.parse_args(argv)
    is_committed = outdir.is_committed_profile(ap, args, committed, reps_key)
    args.out = outdir.destination(subdir, is_committed, args.out)
    return args


def write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str] | None = None) -> None:
    """`rows` as a CSV file: the `columns` (default: the first row's keys), no others."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, columns or list(rows[0]), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def signature(args: argparse.Namespace) -> dict[str, Any]:
    """What a resumed run must share with the stopped one: every argument but these."""
    skip = ("resume", "out", "order_seed", "profile")
    return json.loads(json.dumps({k: v for k, v in vars(args).items() if k not in skip}))


def resumed(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The measurements of a stopped run with the same arguments (its seed taken over),
    or an empty record."""
    fresh: dict[str, Any] = {"signature": signature(args), "values": {}}
    if not (args.resume and path.exists()):
        return fresh
    old = json.loads(path.read_text())
    if old.get("signature") != fresh["signature"]:
        progress(f"{path}: another run's arguments; starting afresh")
        return fresh
    args.order_seed = old["order_seed"]
    progress(f"resuming {path}: {sum(map(len, old['values'].values()))} measurements kept")
    return {"signature": fresh["signature"], "values": old["values"]}


def measure_build(
    spec: Spec,
    trial: Trial,
    kept: dict[str, Any] | None = None,
    save: Callable[[], None] = lambda: None,
    reps: int | None = None,
    salt: str | None = None,
) -> dict[str, Any]:
    """Every variant of `spec` on one build, `reps` (--reps) repetitions, in a shuffled
    order per repetition (seeded by --order-seed and `salt`, the build's name by default);
    what `kept` holds (a resumed run) is not measured again, and `save` is called after
    each measurement. The build's figures."""
    args = trial.args
    kept = {} if kept is None else kept
    reps = args.reps if reps is None else reps
    names = spec.variants(args)
    passes = spec.measure(args) if spec.passes else {"": spec.measure}
    orders = provenance.interleaved(names, reps, args.order_seed, salt or trial.build)
    values: dict[str, dict[str, list[Any]]] = {p: {n: [] for n in names} for p in passes}
    for rep, order in enumerate(orders):
        for pass_name, measure in passes.items():
            for name in order:
                key = " ".join(filter(None, (str(rep), pass_name, name)))
                if key not in kept:
                    what = f"{pass_name} {name}".strip()
                    progress(f"{spec.prog} {trial.build} rep {rep + 1}/{reps}: {what}")
                    value = measure(dataclasses.replace(trial, rep=rep), name)
                    kept[key] = json.loads(json.dumps(value))
                    save()
                values[pass_name][name].append(kept[key])
    figures = spec.figures(args, values if spec.passes else values[""])
    if spec.order_in_build:
        return {"binary": trial.binary, "order": orders, **figures}
    return {"order": orders, "figures": figures}


def arguments(spec: Spec, argv: list[str] | None = None) -> argparse.Namespace:
    """The spec's command line: command_line's, --order-seed and --resume."""

    def options(ap: argparse.ArgumentParser) -> None:
        spec.options(ap)
        add_common(ap)
        ap.add_argument(
            "--resume",
            action="store_true",
            help="keep what a stopped run with the same arguments measured (its .partial file)",
        )

    committed = list(spec.committed)
    switch = spec.subject is None
    return command_line(
        spec.prog, spec.doc, spec.subdir, argv, options, committed, reps=spec.reps, builds=switch
    )


def subjects(spec: Spec, args: argparse.Namespace) -> dict[str, str] | None:
    """The builds to measure (builds_to_measure), or a bench's own subject once this
    machine has root and its tools; None once stderr says what is missing."""
    if spec.subject is None:
        return builds_to_measure(spec.prog, args.build, list(spec.tools))
    if lacking := missing(spec.tools) + (["root"] if os.geteuid() != 0 else []):
        print(f"{spec.prog}: needs {', '.join(lacking)}", file=sys.stderr)
        return None
    return spec.subject()


def main(spec: Spec, argv: list[str] | None = None) -> int:
    """Parse, check, measure every build's variants interleaved, write spec.filename."""
    args = arguments(spec, argv)
    builds = subjects(spec, args)
    if builds is None:
        return 2
    if problem := spec.check(args):
        print(f"{spec.prog}: {problem}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    partial = args.out / f"{spec.filename}.partial"
    state = resumed(partial, args)
    order_seed(args)
    state["order_seed"] = args.order_seed
    run = start_run(spec.prog, builds if spec.subject is None else None, argv)
    if run is None:
        return 2
    result: dict[str, Any] = {"method": spec.doc, "reps": args.reps, **spec.head(args)}
    result["builds"] = {}
    if spec.lab is None:
        from bench import lab as veth_lab  # the veth pairs every switch bench runs on

        lab = veth_lab.veths()
    else:
        lab = spec.lab(args)

    def save() -> None:
        partial.write_text(json.dumps(state) + "\n")

    with lab as opened, tempfile.TemporaryDirectory(prefix=f"p4lb-{spec.prog}-") as tmp:
        for build, binary in builds.items():
            trial = Trial(build, binary, args, Path(tmp), opened)
            kept = state["values"].setdefault(build, {})
            res = measure_build(spec, trial, kept, save)
            if spec.order_in_build:
                result["builds"][build] = res
            else:
                result.setdefault("order", {})[build] = res["order"]
                result["builds"][build] = res["figures"]
    if isinstance(result.get("machine"), dict):
        result["machine"]["loadavg_at_end"] = os.getloadavg()
    where = "each build's `order`" if spec.order_in_build else "`order`"
    result["provenance"] = spec.provenance | run.finish(
        args.reps,
        order=f"{where}: the variants of each repetition, in the order they ran",
        order_seed=args.order_seed,
    )
    status = spec.write(args, result) if spec.write is not None else None
    out = args.out / spec.filename
    out.write_text(json.dumps(result, indent=2) + "\n")
    partial.unlink(missing_ok=True)
    progress(f"wrote {out}; {outdir.said(args.out)}")
    return status or 0

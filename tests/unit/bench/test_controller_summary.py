"""bench-controller's printed lines: each figure, rounded as shown, beside its goal."""

from bench.controller import lines
from bench.stats import summary


def test_the_lines_give_each_figure_and_its_goal() -> None:
    doc = {"vips": 100, "backends_per_vip": 8}
    f = {
        "pipeline_push_s": summary([0.41234, 0.5, 0.4]),
        "apply_empty_s": summary([1.23456, 1.1, 1.4]),
        "apply_empty_writes": 1001,
        "apply_noop_s": [0.2, 0.1, 0.3, 0.25, 0.15],
        "cli_weight_set_s": [0.9, 1.1, 1.0],
        "weight_change_effect_ms": [4.0, 6.0, 50.25],
        "weight_change_trials_ok": 2,
    }
    assert lines(doc, f).splitlines() == [
        "pipeline push: 0.412 s median",
        "apply 100 WRR VIPs x 8 backends on an empty switch: 1.235 s median, 1.400 s max "
        "(1001 writes; goal < 2 s)",
        "no-op apply: median 0.200 s, max 0.300 s (goal < 0.5 s)",
        "`p4lb weight set` as a command (process start included): median 1.000 s",
        "weight change -> next new connection follows it: 2/3 trials, SYN out of the switch "
        "6.0 ms median, 50.2 ms max after the CLI returned (goal < 100 ms)",
    ]
    assert lines(doc, f).endswith("\n")

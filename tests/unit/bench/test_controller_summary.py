"""bench-controller's printed lines: each figure, rounded as shown, beside its goal."""

from bench.controller import Figures, summary


def test_the_lines_give_each_figure_and_its_goal() -> None:
    f = Figures(
        vips=100,
        backends_per_vip=8,
        pipeline_push_s=0.41234,
        apply_empty_s=1.23456,
        apply_empty_writes=1001,
        apply_noop_s=[0.2, 0.1, 0.3, 0.25, 0.15],
        cli_weight_set_s=[0.9, 1.1, 1.0],
        weight_change_effect_ms=[4.0, 6.0, 50.25],
        weight_change_trials_ok=2,
    )
    assert summary(f).splitlines() == [
        "pipeline push: 0.412 s",
        "apply 100 WRR VIPs x 8 backends on an empty switch: 1.235 s (1001 writes; goal < 2 s)",
        "no-op apply: median 0.200 s, max 0.300 s (goal < 0.5 s)",
        "`p4lb weight set` as a command (process start included): median 1.000 s",
        "weight change -> next new connection follows it: 2/3 trials, SYN out of the switch "
        "6.0 ms median, 50.2 ms max after the CLI returned (goal < 100 ms)",
    ]
    assert summary(f).endswith("\n")

"""The experiment suite: servers with a capacity, several clients with many
source addresses, every algorithm of the compiled program against the claims of the papers
p4lb started from.

`python -m bench.experiments.run` measures (raw files under results/experiments/raw/, one
archive, raw.tar.xz, once the run is complete: bench.rawstore); `python -m
bench.experiments.report` rebuilds every table and plot from those raw files."""

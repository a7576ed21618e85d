"""Everything that runs a program: the runner and the runs it measures with
(runs, stats), the profiler's driver, the bundled workloads' inputs,
bench, confirmation, tune, MO's load measurements and prefetch check."""

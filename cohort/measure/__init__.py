"""Everything that runs a program: the runner, the profiler's driver, bench, confirmation,
tune and MO's load measurements."""

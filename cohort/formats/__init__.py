"""Every file format Cohort reads or writes (plans, profiles, cachegrind's output, ELF notes,
prefetch files, the heap trace, workload inputs): parsing and rendering only; nothing here
starts a process."""

"""Every file format Cohort reads or writes (plans, profiles, the results of
cohort bench, cachegrind's output, ELF notes, prefetch files, the heap
trace): parsing and rendering only; nothing here starts a process."""

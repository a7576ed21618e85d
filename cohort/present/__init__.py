"""What a person reads: explain, report, plots and the graph drawing."""

"""Cohort: heap layout optimisation for unmodified C and C++ programs."""

__version__ = "0.1.0"

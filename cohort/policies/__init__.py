"""The grouping policies a plan is made by: HALO's affinity grouping (halo), Automatic Pool
Allocation's data-structure graphs (apa), the hot-data-streams comparator (hds, with
sequitur), and the context families they group."""

"""From a profile to a plan: the planner (policy dispatch, cost model, decision paths, the rest
pool, rendering), a group's worth at scale, transfer to other runs, selectors, headroom,
and plans written by hand."""

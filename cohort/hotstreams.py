"""Hot data streams (Chilimbi, PLDI 2001) and their co-allocation sets
(Chilimbi and Shaham, PLDI 2006), as HALO's section 5 reimplemented them
for its comparison: the `hds` comparator's analysis.

A trace of heap references (one symbol per object, sequitur.py's input) is
compressed into a grammar; each rule generates a subsequence that repeats.
A rule's *uses* are the times its expansion occurs in the derivation of the
trace, its *heat* is length x uses: the references it accounts for. A hot
data stream is a rule of 2 to 20 symbols whose heat reaches a threshold H;
it is *minimal* if no rule inside it is hot too. H is chosen so that the
minimal hot streams cover a target share of the trace (HALO used 90%).

Each stream becomes the set of allocation contexts of its objects. Placing
those contexts' objects together saves, per occurrence of the stream, the
cache lines its objects take apart less those they take together; sets with
the same contexts add up. A weighted-set-packing approximation (greedy by
weight / sqrt(size), Halldorsson 2000) then chooses disjoint sets: each
chosen set is a group."""

import math

from cohort import sequitur

LINE = 64


def topological(grammar):
    """The grammar's rules, every parent before its children, the start rule first."""
    order, seen = [], set()
    for root in [grammar.start]:
        stack = [(root, iter(root.symbols()))]
        seen.add(root.number)
        while stack:
            rule, it = stack[-1]
            for s in it:
                if isinstance(s, sequitur.Rule) and s.number not in seen:
                    seen.add(s.number)
                    stack.append((s, iter(s.symbols())))
                    break
            else:
                stack.pop()
                order.append(rule)
    return order[::-1]


def rule_counts(grammar):
    """({rule number: expansion length}, {rule number: uses}, rules in
    topological order)."""
    order = topological(grammar)
    length = {}
    for r in reversed(order):   # children first
        length[r.number] = sum(length[s.number] if isinstance(s, sequitur.Rule) else 1 for s in r.symbols())
    uses = {r.number: 0 for r in order}
    uses[grammar.start.number] = 1
    for r in order:             # parents first
        for s in r.symbols():
            if isinstance(s, sequitur.Rule):
                uses[s.number] += uses[r.number]
    return length, uses, order


def minimal_hot(grammar, threshold, min_len=2, max_len=20, counts=None):
    """[(rule, heat)] of the minimal hot data streams at this heat threshold."""
    length, uses, order = counts or rule_counts(grammar)
    hot, holds_hot = {}, {}
    for r in reversed(order):   # children first
        if r is grammar.start:
            continue
        inner = any(isinstance(s, sequitur.Rule) and (hot.get(s.number) or holds_hot.get(s.number))
                    for s in r.symbols())
        holds_hot[r.number] = inner
        heat = length[r.number] * uses[r.number]
        hot[r.number] = not inner and min_len <= length[r.number] <= max_len and heat >= threshold
    return [(r, length[r.number] * uses[r.number]) for r in order if hot.get(r.number)]


def coverage(streams, total):
    return sum(h for _, h in streams) / total if total else 0.0


def hot_streams(trace, target=0.9, min_len=2, max_len=20):
    """The minimal hot data streams of a trace: ([(symbols, uses)], the
    threshold H, the share of the trace they cover). H is the largest
    candidate heat at which they cover `target` of the trace, found by
    bisection over the rules' heats; if no threshold reaches it, the one
    that covers most."""
    trace = list(trace)
    g = sequitur.build(trace)
    counts = rule_counts(g)
    length, uses, _ = counts
    heats = sorted({length[n] * uses[n] for n in length if n != g.start.number
                    and min_len <= length[n] <= max_len}, reverse=True)
    if not heats:
        return [], None, 0.0
    lo, hi = 0, len(heats) - 1          # heats[hi] is the lowest threshold
    best = None
    while lo <= hi:
        mid = (lo + hi) // 2
        found = minimal_hot(g, heats[mid], min_len, max_len, counts)
        if coverage(found, len(trace)) >= target:
            best = (mid, found)
            hi = mid - 1                 # try a higher threshold
        else:
            lo = mid + 1
    if best is None:
        found = minimal_hot(g, heats[-1], min_len, max_len, counts)
        best = (len(heats) - 1, found)
    h, found = heats[best[0]], best[1]
    return [(sequitur.expand(r), uses[r.number]) for r, _ in found], h, coverage(found, len(trace))


def coallocation_sets(streams, context_of, size_of):
    """{frozenset of contexts: projected saving} from the streams: per
    occurrence, the cache lines the stream's distinct objects take one by
    one less those they take packed together (size_of: bytes per object).
    Objects of no context (None) are left out."""
    sets = {}
    for symbols, uses in streams:
        objects = [o for o in dict.fromkeys(symbols) if context_of.get(o) is not None]
        if not objects:
            continue
        apart = sum(math.ceil(max(size_of[o], 1) / LINE) for o in objects)
        together = math.ceil(sum(max(size_of[o], 1) for o in objects) / LINE)
        saving = (apart - together) * uses
        if saving > 0:
            key = frozenset(context_of[o] for o in objects)
            sets[key] = sets.get(key, 0) + saving
    return sets


def pack(sets):
    """Weighted set packing, greedy by weight / sqrt(size): [(set, weight)]
    of disjoint sets, the best first."""
    chosen, used = [], set()
    for s, w in sorted(sets.items(), key=lambda kv: (-kv[1] / math.sqrt(len(kv[0])), sorted(kv[0]))):
        if not s & used:
            chosen.append((s, w))
            used |= s
    return chosen

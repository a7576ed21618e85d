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

from cohort.policies import sequitur

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


def pieces(n, max_len):
    """Lengths of the near-equal pieces, none longer than max_len, that a
    stretch of n references is cut into."""
    k = -(-n // max_len)
    return [n // k + (1 if i < n % k else 0) for i in range(k)] if n else []


def minimal_hot(grammar, threshold, min_len=2, max_len=20, counts=None):
    """The minimal hot data streams at this heat threshold, as
    [(heat, rule)] for whole rules and [(heat, (symbols, uses, piece
    lengths, shortest hot piece))] for the stretches of longer ones
    (streams_of expands those).

    A rule of min_len to max_len symbols is a stream if its heat reaches the
    threshold and no rule inside it is hot. A hot rule longer than max_len
    (a traversal of hundreds of objects, repeated) is no stream itself, but
    its stretches between hot rules inside it repeat as often as it does:
    each is cut into near-equal pieces of at most max_len, and a piece of
    min_len or more whose own heat reaches the threshold is a stream. That
    is how one regular pattern spreads over many streams (HALO, section 5.2)."""
    length, uses, order = counts or rule_counts(grammar)
    hot, holds_hot, found = {}, {}, []
    for r in reversed(order):   # children first
        if r is grammar.start:
            continue
        body = r.symbols()
        inner = any(isinstance(s, sequitur.Rule) and (hot.get(s.number) or holds_hot.get(s.number))
                    for s in body)
        n, u = length[r.number], uses[r.number]
        heat = n * u
        hot[r.number] = not inner and min_len <= n <= max_len and heat >= threshold
        holds_hot[r.number] = inner
        if hot[r.number]:
            found.append((heat, r))
        elif n > max_len and heat >= threshold:
            stretch, size = [], 0
            for s in body + [None]:
                if s is None or isinstance(s, sequitur.Rule) and (hot.get(s.number) or holds_hot.get(s.number)):
                    parts = pieces(size, max_len)
                    least = max(min_len, -(-threshold // u))   # the shortest piece that is hot
                    heat = sum(k for k in parts if k >= least) * u
                    if heat:
                        found.append((heat, (stretch, u, parts, least)))
                        holds_hot[r.number] = True
                    stretch, size = [], 0
                else:
                    stretch.append(s)
                    size += length[s.number] if isinstance(s, sequitur.Rule) else 1
    return found


def streams_of(found):
    """[(symbols, uses)] of minimal_hot's streams: rules expanded, stretches
    expanded and cut into their pieces."""
    out = []
    for _, item in found:
        if isinstance(item, sequitur.Rule):
            continue
        symbols, u, parts, least = item
        seq, at = [], 0
        for s in symbols:
            seq.extend(sequitur.expand(s) if isinstance(s, sequitur.Rule) else [s])
        for k in parts:
            if k >= least:
                out.append((seq[at:at + k], u))
            at += k
    return out


def coverage(found, total):
    return sum(h for h, _ in found) / total if total else 0.0


def hot_streams(trace, target=0.9, min_len=2, max_len=20):
    """The minimal hot data streams of a trace: ([(symbols, uses)], the
    threshold H, the share of the trace they cover). H is the largest
    candidate heat at which they cover `target` of the trace, found by
    bisection over the rules' heats; if no threshold reaches it, the one
    that covers most."""
    if not hasattr(trace, "__len__"):
        trace = list(trace)
    g = sequitur.build(trace)    # an array("I") (a heaptrace's refs) goes to the tool as it is
    counts = rule_counts(g)
    length, uses, _ = counts
    heats = set()
    for n in length:
        if n == g.start.number:
            continue
        if min_len <= length[n] <= max_len:
            heats.add(length[n] * uses[n])
        elif length[n] > max_len:   # the heats its pieces can have
            heats.update(k * uses[n] for k in range(min_len, max_len + 1))
    heats = sorted(heats, reverse=True)
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
    streams = [(sequitur.expand(r), uses[r.number]) for _, r in found if isinstance(r, sequitur.Rule)]
    return streams + streams_of(found), h, coverage(found, len(trace))


def coallocation_sets(streams, context_of, size_of, counts=None):
    """{frozenset of contexts: projected saving} from the streams: per
    occurrence, the cache lines the stream's distinct objects take one by
    one less those they take packed together (size_of: bytes per object).
    Objects of no context (None) are left out. counts, if given, gains the
    number of streams behind each set."""
    sets = {}
    for symbols, uses in streams:
        objects = [o for o in dict.fromkeys(symbols) if context_of[o] is not None]
        if not objects:
            continue
        apart = sum(math.ceil(max(size_of[o], 1) / LINE) for o in objects)
        together = math.ceil(sum(max(size_of[o], 1) for o in objects) / LINE)
        saving = (apart - together) * uses
        if saving > 0:
            key = frozenset(context_of[o] for o in objects)
            sets[key] = sets.get(key, 0) + saving
            if counts is not None:
                counts[key] = counts.get(key, 0) + 1
    return sets


def analyse(trace, target=0.9, min_len=2, max_len=20):
    """profile.json's hot_streams record (docs/profile-format.md) for a
    heaptrace.Trace: what was traced, the threshold and coverage of its
    minimal hot streams, and their co-allocation sets of contexts, the
    largest saving first. A plan maps contexts to call sites (planner.py)."""
    streams, threshold, covered = hot_streams(trace.refs, target, min_len, max_len)
    counts = {}
    sets = coallocation_sets(streams, trace.contexts, trace.sizes, counts)
    return {
        "trace": {"references": len(trace.refs), "objects": len(trace.contexts),
                  "macro_accesses": trace.seen, "burst": trace.burst, "sampled_one_in": trace.period},
        "target": target, "min_length": min_len, "max_length": max_len,
        "threshold": threshold, "coverage": round(covered, 6), "streams": len(streams),
        "sets": [{"contexts": sorted(k), "saving": w, "streams": counts[k]}
                 for k, w in sorted(sets.items(), key=lambda kv: (-kv[1], sorted(kv[0])))],
    }


def pack(sets):
    """Weighted set packing, greedy by weight / sqrt(size): [(set, weight)]
    of disjoint sets, the best first."""
    chosen, used = [], set()
    for s, w in sorted(sets.items(), key=lambda kv: (-kv[1] / math.sqrt(len(kv[0])), sorted(kv[0]))):
        if not s & used:
            chosen.append((s, w))
            used |= s
    return chosen

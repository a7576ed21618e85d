"""Identification: HALO's selectors (CGO 2020, section 4.3, Figure 10).

A selector says, from call sites alone, whether an allocation belongs to a
group: a disjunction of conjunctions of sites ("the stack holds sites 3 and
7, or site 9"). The runtime evaluates the groups' selectors in order and the
first match wins, so groups are handled from the most popular down, and a
group's selector need not avoid contexts of groups handled before it.

Two departures from the pseudocode, both deliberate:
- Figure 10 ORs every intermediate conjunction into the selector, which would
  make each refinement pointless (the weaker conjunction already matches all
  the refined one does); only a member's final conjunction is added.
- Ties between sites that remove equally many conflicts go to the site
  *lower in the stack*, which we read as nearer the allocation (innermost):
  the runtime sees those first, and the entry site is what its quick test
  looks at."""

from dataclasses import dataclass, field


@dataclass
class Selector:
    group: int                 # index into the groups given
    conjunctions: list         # [tuple of sites], each in stack order (innermost first)
    conflicts: list            # contexts of other, later groups or of none that still match
    unidentifiable: list = field(default_factory=list)  # members with no application frame


def holding(chains):
    """{site: the set of contexts whose chain holds it}: what the greedy loop
    counts its conflicts in."""
    index = {}
    for c, chain in chains.items():
        for s in chain:
            index.setdefault(s, set()).add(c)
    return index


def matching(conjunction, index, everything):
    """The contexts whose chains hold every site of `conjunction` (index:
    holding(chains); everything: all their ids, which an empty conjunction
    matches)."""
    if not conjunction:
        return set(everything)
    sets = sorted((index.get(s, set()) for s in conjunction), key=len)
    return sets[0].intersection(*sets[1:])


def member_conjunction(chain, candidates, chains, index=None):
    """The greedy loop of Figure 10 for one member: add the site of `chain`
    that leaves the fewest conflicting chains, until nothing improves. The
    conflicts left by a site are the pool's contexts that hold it, counted
    as an intersection with `index` (holding(chains)): cppcheck's 40,000
    contexts and stacks of 30 sites took 17 s counted one by one."""
    index = holding(chains) if index is None else index
    expr, conflicts, pool = [], None, set(candidates)
    while conflicts != 0:
        best = None
        for site in chain:
            if site in expr:
                continue
            m = len(pool & index.get(site, set()))
            if best is None or m < best[0]:  # strict: an innermost site wins ties
                best = (m, site)
        if best is None or (conflicts is not None and best[0] >= conflicts):
            break
        expr.append(best[1])
        conflicts = best[0]
        pool &= index.get(best[1], set())
    order = {s: i for i, s in enumerate(chain)}
    return tuple(sorted(expr, key=order.get))


def minimal(conjunctions):
    """The conjunctions that no other one implies, each once. A conjunction
    is a set of sites: members entered through a recursive builder's left and
    right calls hold the same sites in another order, and their conjunctions
    are one term, kept once (in the order first seen). A conjunction whose
    sites include all of another's adds nothing to the disjunction."""
    kept = []
    for conj in sorted(dict.fromkeys(conjunctions), key=len):   # weakest first; stable
        if not any(set(k) <= set(conj) for k in kept):
            kept.append(conj)
    first = {frozenset(c): i for i, c in reversed(list(enumerate(conjunctions)))}
    return sorted(kept, key=lambda c: first[frozenset(c)])


def identify(groups, contexts, popularity, index=None):
    """groups: [[context id]]; contexts: {context id: [site] innermost first};
    popularity: [number per group]; index: holding(contexts), when the
    caller has it. Returns Selectors, most popular first."""
    chains = {c: frozenset(s) for c, s in contexts.items()}
    index = holding(chains) if index is None else index
    group_of = {c: g for g, members in enumerate(groups) for c in members}
    order = sorted(range(len(groups)), key=lambda g: (-popularity[g], g))
    ignore, selectors = set(), []
    for g in order:
        ignore.add(g)
        candidates = [c for c in sorted(contexts) if group_of.get(c) not in ignore]
        conjunctions, unidentifiable = [], []
        for member in groups[g]:
            chain = contexts[member]
            if not chain:
                unidentifiable.append(member)
                continue
            conjunctions.append(member_conjunction(chain, candidates, chains, index))
        conjunctions = minimal(conjunctions)
        matched = set().union(*(matching(conj, index, chains) for conj in conjunctions))
        conflicts = [c for c in candidates if c in matched]
        selectors.append(Selector(group=g, conjunctions=conjunctions, conflicts=conflicts,
                                  unidentifiable=unidentifiable))
    return selectors

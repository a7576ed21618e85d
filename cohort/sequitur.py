"""SEQUITUR (Nevill-Manning and Witten, 1997): a context-free grammar that
generates exactly one sequence, built online in linear time. Hot data
streams (Chilimbi, PLDI 2001) are read off its rules (hotstreams.py).

Two properties hold after every symbol appended:
- digram uniqueness: no pair of adjacent symbols appears twice in the
  grammar without overlapping;
- rule utility: every rule but the start rule is used at least twice.

Symbols are integers (terminals) or Rule objects (nonterminals), kept in
one circular doubly linked list per rule, whose guard node closes the
circle. A dictionary maps each digram to the node where it starts."""


class Rule:
    __slots__ = ("guard", "uses", "number")

    def __init__(self, number):
        self.guard = Node(self, guard=True)
        self.guard.prev = self.guard.next = self.guard
        self.uses = 0          # nonterminal nodes that name it
        self.number = number

    def first(self):
        return self.guard.next

    def last(self):
        return self.guard.prev

    def symbols(self):
        """The rule's right-hand side: ints and Rules."""
        out, n = [], self.guard.next
        while not n.guard:
            out.append(n.value)
            n = n.next
        return out


class Node:
    __slots__ = ("value", "prev", "next", "guard")

    def __init__(self, value, guard=False):
        self.value = value     # an int, or a Rule (for a guard: its own rule)
        self.prev = self.next = None
        self.guard = guard

    def key(self):
        """What identifies the symbol in a digram."""
        v = self.value
        return ("r", v.number) if isinstance(v, Rule) else v


class Grammar:
    """Feed symbols with append() (or extend()); then rules() lists the
    start rule and every other rule, rules() is what the analyses read."""

    def __init__(self):
        self._count = 0
        self.start = self._new_rule()
        self._digrams = {}

    def _new_rule(self):
        r = Rule(self._count)
        self._count += 1
        return r

    # -- list surgery --
    def _digram_key(self, node):
        return (node.key(), node.next.key())

    def _forget(self, node):
        """Drop the digram starting at node from the index, if it is the one indexed."""
        if node.guard or node.next.guard:
            return
        k = self._digram_key(node)
        if self._digrams.get(k) is node:
            del self._digrams[k]

    def _join(self, left, right):
        """Link left to right, forgetting the digram left used to start."""
        if left.next is not None:
            self._forget(left)
            # A run of three equal symbols holds two overlapping digrams, of
            # which only the first was indexed: index the one that survives.
            if (right.prev is not None and right.next is not None and not right.guard
                    and not right.prev.guard and not right.next.guard
                    and right.key() == right.prev.key() == right.next.key()):
                self._digrams[self._digram_key(right)] = right
            if (left.prev is not None and left.next is not None and not left.guard
                    and not left.prev.guard and not left.next.guard
                    and left.key() == left.prev.key() == left.next.key()):
                self._digrams[self._digram_key(left.prev)] = left.prev
        left.next = right
        right.prev = left

    def _insert_after(self, left, node):
        self._join(node, left.next)
        self._join(left, node)

    def _symbol(self, value):
        if isinstance(value, Rule):
            value.uses += 1
        return Node(value)

    def _delete(self, node):
        """Unlink a symbol node, forgetting its digram and its rule's use."""
        self._join(node.prev, node.next)
        self._forget(node)
        if isinstance(node.value, Rule):
            node.value.uses -= 1

    # -- the two properties --
    def _check(self, node):
        """Enforce digram uniqueness for the digram starting at node; True
        if the grammar changed."""
        if node.guard or node.next.guard:
            return False
        k = self._digram_key(node)
        found = self._digrams.get(k)
        if found is None:
            self._digrams[k] = node
            return False
        if found.next is node or node.next is found:
            return False   # overlapping: aaa
        self._match(node, found)
        return True

    def _match(self, new, old):
        if old.prev.guard and old.next.next.guard:
            rule = old.prev.value            # the digram is a whole rule: reuse it
            self._substitute(new, rule)
        else:
            rule = self._new_rule()
            self._insert_after(rule.last(), self._symbol(new.value))
            self._insert_after(rule.last(), self._symbol(new.next.value))
            self._substitute(old, rule)
            self._substitute(new, rule)
            self._digrams[self._digram_key(rule.first())] = rule.first()
        first = rule.first()
        if isinstance(first.value, Rule) and first.value.uses == 1:
            self._expand(first)

    def _substitute(self, node, rule):
        """Replace the digram starting at node with a nonterminal for rule."""
        prev = node.prev
        self._delete(prev.next)
        self._delete(prev.next)
        self._insert_after(prev, self._symbol(rule))
        if not self._check(prev):
            self._check(prev.next)

    def _expand(self, node):
        """Replace a nonterminal used once by its rule's symbols."""
        rule = node.value
        left, right = node.prev, node.next
        first, last = rule.first(), rule.last()
        self._forget(left)
        self._forget(node)
        rule.uses -= 1
        left.next, first.prev = first, left
        last.next, right.prev = right, last
        rule.guard.next = rule.guard.prev = rule.guard   # the rule is now empty, and unused
        if not last.guard and not right.guard:
            self._digrams[self._digram_key(last)] = last
        if not left.guard:
            self._digrams.setdefault(self._digram_key(left), left)

    # -- public --
    def append(self, value):
        self._insert_after(self.start.last(), self._symbol(int(value)))
        last = self.start.last()
        if not last.prev.guard:
            self._check(last.prev)

    def extend(self, values):
        for v in values:
            self.append(v)

    def rules(self):
        """Every rule in use, the start rule first, then in order of first
        appearance in a depth-first walk from it."""
        out, seen, stack = [], set(), [self.start]
        while stack:
            r = stack.pop()
            if r.number in seen:
                continue
            seen.add(r.number)
            out.append(r)
            stack.extend(reversed([s for s in r.symbols() if isinstance(s, Rule)]))
        return out


def expand(rule):
    """The sequence a rule generates."""
    out, stack = [], [iter(rule.symbols())]
    while stack:
        for s in stack[-1]:
            if isinstance(s, Rule):
                stack.append(iter(s.symbols()))
                break
            out.append(s)
        else:
            stack.pop()
    return out


def build(sequence):
    g = Grammar()
    g.extend(sequence)
    return g

"""SEQUITUR (Nevill-Manning and Witten, 1997): the one context-free grammar
that generates a sequence, with no digram repeated and every rule used at
least twice. Hot data streams (Chilimbi, PLDI 2001) are read off its rules
(hotstreams.py).

The grammar is built by build/tools/cohort-sequitur (tools/sequitur.c), in
linear time: a trace holds a million references, and the per-reference
work belongs in C. This module feeds it and reads its grammar back."""

import subprocess
from array import array

from cohort.errors import CohortError
from cohort.paths import sequitur_tool

MAGIC = b"CHGRAM1\0"
RULE_BIT = 1 << 31


class Rule:
    """A rule: its number (0 for the start rule, then in depth-first order
    of first use) and its right-hand side of ints and Rules."""
    __slots__ = ("number", "body")

    def __init__(self, number):
        self.number = number
        self.body = []

    def symbols(self):
        return self.body

    def __repr__(self):
        return f"Rule({self.number})"


class Grammar:
    def __init__(self, rules):
        self._rules = rules
        self.start = rules[0]

    def rules(self):
        """Every rule, the start rule first, then in order of first
        appearance in a depth-first walk from it."""
        return list(self._rules)


def parse(data):
    """A Grammar from cohort-sequitur's output. Raises ValueError if it is not one."""
    if data[:8] != MAGIC or len(data) < 12 or len(data) % 4:
        raise ValueError("not a grammar from cohort-sequitur")
    words = array("I")
    words.frombytes(data[8:])
    n = words[0]
    rules = [Rule(i) for i in range(n)]
    at = 1
    for r in rules:
        if at >= len(words):
            raise ValueError("the grammar is truncated")
        length = words[at]
        body = words[at + 1:at + 1 + length]
        if len(body) != length:
            raise ValueError("the grammar is truncated")
        r.body = [rules[s - RULE_BIT] if s >= RULE_BIT else s for s in body]
        at += 1 + length
    if at != len(words) or n == 0:
        raise ValueError("the grammar has bytes after its rules, or no start rule")
    return Grammar(rules)


def build(sequence):
    """The grammar of a sequence of ints from 0 to 2^31 - 1."""
    symbols = sequence if isinstance(sequence, array) and sequence.typecode == "I" else array("I", sequence)
    try:
        proc = subprocess.run([str(sequitur_tool())], input=symbols.tobytes(), capture_output=True)
    except OSError as e:
        raise CohortError(f"cannot run cohort-sequitur: {e.strerror}") from e
    if proc.returncode != 0:
        why = proc.stderr.decode(errors="replace").strip() or f"exit status {proc.returncode}"
        raise CohortError(f"SEQUITUR failed: {why}")
    try:
        return parse(proc.stdout)
    except ValueError as e:
        raise CohortError(f"cohort-sequitur's output is unusable: {e}") from e


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

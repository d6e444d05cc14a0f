"""The terms of one z3 context as Python data, so that a traversal each query repeats is cheap.

A proof asks 10-60 queries about one hook's terms, and each query's abstraction (products.py)
walks all of them: z3's Python wrappers make every `children()` call cost microseconds, which
was a third of a family proof's time. Terms reads each term's children once and holds the term,
so that its id stays its own (z3 reuses the ids of freed terms); the walks are then over ids.
"""

from __future__ import annotations

from collections.abc import Iterator

import z3


class Terms:
    """Every term reachable from the roots added so far: its children's ids, and what kind it is."""

    def __init__(self):
        self.nodes: dict[int, z3.ExprRef] = {}
        self.kids: dict[int, tuple[int, ...]] = {}
        self.numerals: dict[int, int] = {}  # the integer numerals, by id
        self.divisions: set[int] = set()  # the `div` and `mod` terms

    def add(self, roots: list) -> list[int]:
        """Read the terms reachable from `roots` that are new; the roots' ids."""
        stack = [r for r in roots if r.get_id() not in self.kids]
        while stack:
            node = stack.pop()
            key = node.get_id()
            if key in self.kids:
                continue
            kids = node.children()
            self.nodes[key], self.kids[key] = node, tuple(k.get_id() for k in kids)
            if z3.is_int_value(node):
                self.numerals[key] = node.as_long()
            elif z3.is_app_of(node, z3.Z3_OP_IDIV) or z3.is_app_of(node, z3.Z3_OP_MOD):
                self.divisions.add(key)
            stack.extend(k for k in kids if k.get_id() not in self.kids)
        return [r.get_id() for r in roots]

    def children(self, node: z3.ExprRef) -> list:
        """node.children(), from what was read if it was."""
        kids = self.kids.get(node.get_id())
        return node.children() if kids is None else [self.nodes[k] for k in kids]

    def post_order(self, roots: list[int], done: set[int] | None = None) -> Iterator[int]:
        """Each term reachable from `roots` once, children first, in the order linear.Linearizer.rewrite
        meets them when it rewrites the roots one after the other with a fresh memo. The terms in `done`
        (which the walk adds each term it yields to) are not walked."""
        done = set() if done is None else done
        for root in roots:
            stack, expanded = [root], set()
            while stack:
                key = stack[-1]
                if key in done:
                    stack.pop()
                    continue
                if key not in expanded:
                    expanded.add(key)
                    todo = [k for k in self.kids[key] if k not in done]
                    if todo:
                        stack.extend(todo)
                        continue
                stack.pop()
                done.add(key)
                yield key

    def depth_first(self, roots: list[int]) -> Iterator[int]:
        """Each term reachable from `roots` once, in the order of a depth-first walk with a stack of the
        roots (facts._divisions's order)."""
        seen, stack = set(), list(roots)
        while stack:
            key = stack.pop()
            if key in seen:
                continue
            seen.add(key)
            yield key
            stack.extend(self.kids[key])

"""The terms of one z3 context as Python data, so that a traversal each query repeats is cheap.

A proof asks 10-60 queries about one hook's terms, and each query's abstraction (products.py)
walks all of them: z3's Python wrappers make every `children()` call cost microseconds, which
was a third of a family proof's time. Terms reads each term's children once and holds the term,
so that its id stays its own (z3 reuses the ids of freed terms); the walks are then over ids.
"""

from __future__ import annotations

from collections.abc import Iterator

import z3
from z3 import z3core
from z3.z3 import _to_expr_ref  # the term's Python class from its sort, as every z3 call returns it

_DIVISIONS = (z3.Z3_OP_IDIV, z3.Z3_OP_MOD)


def children(term: z3.ExprRef) -> list:
    """term.children() through z3's C API: the wrapper checks the term's kind again for every child, three
    times the calls (the walks here and in cuts.py read ~10 K terms a family proof). Only reads: no term is made."""
    ctx = term.ctx
    ref, node = ctx.ref(), term.as_ast()
    if z3core.Z3_get_ast_kind(ref, node) != z3.Z3_APP_AST:
        return []
    return [_to_expr_ref(z3core.Z3_get_app_arg(ref, node, i), ctx) for i in range(z3core.Z3_get_app_num_args(ref, node))]


def contains(term: z3.ExprRef, target: int) -> bool:
    """Whether the term with id `target` occurs in `term`, each shared subterm visited once. Walks z3's pointers
    without Python wrappers: each is held by its parent while `term` lives."""
    ref, seen, stack = term.ctx.ref(), set(), [term.as_ast()]
    while stack:
        node = stack.pop()
        key = z3core.Z3_get_ast_id(ref, node)
        if key == target:
            return True
        if key not in seen and z3core.Z3_get_ast_kind(ref, node) == z3.Z3_APP_AST:
            seen.add(key)
            stack.extend(z3core.Z3_get_app_arg(ref, node, i) for i in range(z3core.Z3_get_app_num_args(ref, node)))
    return False


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
            kids = children(node)
            self.nodes[key], self.kids[key] = node, tuple(k.get_id() for k in kids)
            if isinstance(node, z3.IntNumRef):
                self.numerals[key] = node.as_long()
            elif kids and node.decl().kind() in _DIVISIONS:
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

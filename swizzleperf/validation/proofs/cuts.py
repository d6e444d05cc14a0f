"""Cuts: prove a composition (order, then raster) one half at a time.

Most remaps compute a linear id (an order: XCD-contiguous, chunked, cluster rounds) and then
turn it into coordinates (a raster: row-major, GROUP_M). z3's nonlinear integer reasoning copes
with each half but often not with both in one formula. A cut is a top-level point of the hook:
the values still live there that depend on the program id. Everything after the point sees
the program only through them, so they can be replaced by free variables constrained only by
range lemmas (each proven first, on one program) — a generalisation of the real formula, so
"unsatisfiable" stays sound whatever the cut, and "satisfiable" only means "ask without it".
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import z3

from swizzleperf.remaps.check import hook_body
from swizzleperf.validation.proofs.sym_values import Run
from swizzleperf.validation.proofs.terms import children, contains


def mentions(term: z3.ExprRef, var: z3.ExprRef) -> bool:
    """Whether `var` occurs in `term`."""
    return contains(term, var.get_id())


def _reads(stmt: ast.stmt) -> set[str]:
    names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return names | {n.target.id for n in ast.walk(stmt) if isinstance(n, ast.AugAssign)}  # `x += 1` reads x


def _overwrites(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement assigns on every path (only plain assignments are counted)."""
    if not isinstance(stmt, ast.Assign):
        return set()
    return {n.id for n in ast.walk(stmt.targets[0]) if isinstance(n, ast.Name)}


def live_after(fn: ast.FunctionDef) -> list[set[str]]:
    """Per top-level statement, the names live after it (a superset: a name is dead only where a
    plain assignment overwrites it before any read). `local = pid // N` is dead once a later
    `local = lid - ...` replaces it, so the cut after `lid` holds `lid` alone."""
    live, out = set(), []
    for stmt in reversed(hook_body(fn)):
        out.append(set(live))
        live = (live - _overwrites(stmt)) | _reads(stmt)
    return out[::-1]


def statement_index(fn: ast.FunctionDef, line: int) -> int:
    """The top-level statement that contains `line` (the last one if none does)."""
    body = hook_body(fn)
    for i, stmt in enumerate(body):
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            return i
    return len(body) - 1


@dataclass
class Copy:
    """One translation of the hook for the program `pid`: its results and its top-level points."""

    pid: z3.ArithRef
    bounds: list
    outputs: list
    points: list[dict]
    violations: list = field(default_factory=list)

    def live_terms(self, index: int, names: set[str], is_value) -> list[z3.ExprRef]:
        """The integer values live after statement `index` that depend on the program id."""
        env = self.points[index]
        terms = [env[n].term for n in sorted(names) if isinstance(env.get(n), Run)]
        unique = {t.get_id(): t for t in terms if is_value(t) and mentions(t, self.pid)}
        return list(unique.values())


@dataclass
class Cut:
    """Live values replaced by free variables, with the range lemmas they were proven to satisfy."""

    pairs: list[tuple[z3.ArithRef, z3.ArithRef]]
    lemmas: list

    def apply(self, term: z3.ExprRef) -> z3.ExprRef:
        return z3.substitute(term, *self.pairs) if self.pairs else term

    @property
    def free(self) -> list[z3.ArithRef]:
        return [free for _, free in self.pairs]


def interval(term: z3.ArithRef, known: dict[int, tuple[int, int]]) -> tuple[int | None, int | None]:
    """Bounds of an integer term by interval arithmetic (None: unbounded). `known` bounds the
    constants by id. Sound for z3's semantics: `%` by a positive constant lies in [0, c), `/` by
    one is the floor; anything else is unbounded."""
    if z3.is_int_value(term):
        return term.as_long(), term.as_long()
    if term.get_id() in known:
        return known[term.get_id()]
    kids = children(term)
    op = term.decl().kind() if kids else None
    if op in (z3.Z3_OP_ADD, z3.Z3_OP_SUB):
        first, *rest = [interval(k, known) for k in kids]
        lo, hi = first
        for k_lo, k_hi in rest:
            if op == z3.Z3_OP_ADD:
                lo, hi = _plus(lo, k_lo), _plus(hi, k_hi)
            else:
                lo, hi = _plus(lo, None if k_hi is None else -k_hi), _plus(hi, None if k_lo is None else -k_lo)
        return lo, hi
    if op == z3.Z3_OP_MUL and len(kids) == 2:
        (a_lo, a_hi), (b_lo, b_hi) = interval(kids[0], known), interval(kids[1], known)
        if None in (a_lo, a_hi, b_lo, b_hi):
            return (0, None) if a_lo is not None and b_lo is not None and a_lo >= 0 and b_lo >= 0 else (None, None)
        corners = [a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi]
        return min(corners), max(corners)
    if op in (z3.Z3_OP_MOD, z3.Z3_OP_IDIV) and z3.is_int_value(kids[1]) and kids[1].as_long() > 0:
        c = kids[1].as_long()
        if op == z3.Z3_OP_MOD:
            return 0, c - 1
        lo, hi = interval(kids[0], known)
        return (None if lo is None else lo // c), (None if hi is None else hi // c)
    if op == z3.Z3_OP_ITE:
        (a_lo, a_hi), (b_lo, b_hi) = interval(kids[1], known), interval(kids[2], known)
        smaller = _extremum(kids[0], kids[1], kids[2])
        if smaller is not None:  # min(a, b) <= each of a, b; max(a, b) >= each
            return ((None if None in (a_lo, b_lo) else min(a_lo, b_lo)), _least(a_hi, b_hi)) if smaller else \
                (_most(a_lo, b_lo), (None if None in (a_hi, b_hi) else max(a_hi, b_hi)))
        return (None if None in (a_lo, b_lo) else min(a_lo, b_lo)), (None if None in (a_hi, b_hi) else max(a_hi, b_hi))
    return None, None


def _extremum(cond: z3.ExprRef, a: z3.ExprRef, b: z3.ExprRef) -> bool | None:
    """True if `If(cond, a, b)` is min(a, b), False if it is max(a, b), else None."""
    if cond.num_args() != 2 or not (cond.arg(0).eq(a) and cond.arg(1).eq(b)):
        return None
    if z3.is_lt(cond) or z3.is_le(cond):
        return True
    if z3.is_gt(cond) or z3.is_ge(cond):
        return False
    return None


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _most(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _plus(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def interval_lemmas(term: z3.ArithRef, known: dict[int, tuple[int, int]]) -> list:
    """The bounds interval() finds, as lemma functions; true by construction, so not proven."""
    try:
        lo, hi = interval(term, known)
    except RecursionError:  # a term nested deeper than Python recurses: no bounds
        return []
    return ([] if lo is None else [lambda v, lo=lo: v >= lo]) + ([] if hi is None else [lambda v, hi=hi: v <= hi])


def lemma_candidates(total: z3.ExprRef, widen):
    """Ranges a linear id or coordinate usually has: [0, total), else [0, inf)."""
    return ([lambda v: widen(v) >= 0, lambda v: widen(v) < total], [lambda v: widen(v) >= 0])


def make_cut(terms: list, tag: str, lemmas_for, known: dict[int, tuple[int, int]]) -> Cut:
    """A Cut for `terms`: lemmas_for(terms) gives proven lemma functions (for all terms), and each
    term's interval bounds are added."""
    free = [z3.Const(f"{tag}_{k}", t.sort()) for k, t in enumerate(terms)]
    shared = lemmas_for(terms)
    lemmas = [lemma(f) for t, f in zip(terms, free) for lemma in [*shared, *interval_lemmas(t, known)]]
    return Cut(list(zip(terms, free)), lemmas)


def mirror(cut: Cut, terms: list, tag: str) -> Cut | None:
    """The same cut on the other program's copy (the lemmas hold for every program)."""
    if len(terms) != len(cut.pairs):
        return None
    free = [z3.Const(f"{tag}_{k}", t.sort()) for k, t in enumerate(terms)]
    swap = list(zip(cut.free, free))
    return Cut(list(zip(terms, free)), [z3.substitute(f, *swap) for f in cut.lemmas])


def determines(check, targets_a: list, targets_b: list, cut_a: Cut, cut_b: Cut) -> bool:
    """Query (A): with the cut values free, do equal targets force equal cut values?

    The query is symmetric in the two copies, so one cut value may be ordered (a < b) rather than
    only distinct: the same answer, and z3 decides a raster's injectivity about 3x faster.
    """
    formulas = [cut_a.apply(x) == cut_b.apply(y) for x, y in zip(targets_a, targets_b)]
    if len(cut_a.free) == 1:
        formulas.append(cut_a.free[0] < cut_b.free[0])
    else:
        formulas.append(z3.Or(*[x != y for x, y in zip(cut_a.free, cut_b.free)]))
    return check([*formulas, *cut_a.lemmas, *cut_b.lemmas], "whether a cut determines the results") is None


def _product_leaves(term: z3.ExprRef, extents: set[int]) -> list | None:
    """The extents a product of extents multiplies, or None if `term` is not one."""
    if term.get_id() in extents:
        return [term]
    if not z3.is_mul(term):
        return None
    leaves = []
    for child in term.children():
        sub = _product_leaves(child, extents)
        if sub is None:
            return None
        leaves += sub
    return leaves


def generalize_products(formulas: list, extents: list, max_programs: int) -> list:
    """The formulas with each product of grid extents (`num_pid_m * num_pid_n`) replaced by a
    free integer in [max factor, max_programs]: a generalisation (every real grid is an
    instance), which turns an order over `count = m * n` into the 1D problem z3 solves fast."""
    ids, products, seen, stack = {e.get_id() for e in extents}, {}, set(), list(formulas)
    while stack:
        node = stack.pop()
        if node.get_id() in seen:
            continue
        seen.add(node.get_id())
        try:
            leaves = _product_leaves(node, ids) if z3.is_mul(node) else None
        except RecursionError:
            leaves = None
        if leaves is not None:
            products[node.get_id()] = (node, leaves)
        else:
            stack.extend(node.children())
    out, extra = list(formulas), []
    for k, (term, leaves) in enumerate(sorted(products.values(), key=lambda p: -len(p[1]))):
        free = z3.Int(f"product_{k}", term.ctx)
        out = [z3.substitute(f, (term, free)) for f in out]
        extra += [free <= max_programs, *[free >= leaf for leaf in leaves]]
    return out + extra

"""Test weakening judged per test: TEST_DELETED, ASSERT_REMOVED, ASSERT_LOOSENED
(docs/contract.md, "Tests and assertions").

Pure: the units (testunits.py) of every test file the diff touches, before and after, in;
weakenings out. Each test before is found after (same file and name, else same name in another
file: moved, else a test holding all of its assertions: renamed), then compared with itself
only: an assertion a change writes in another test never pays for one it removed from this one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from verify_dag.reviewers.contract.testunits import Assertion, Unit
from verify_dag.reviewers.contract.weakening import Weakening, snippet


@dataclass(eq=False)
class _Old:
    unit: Unit
    left: list[Assertion]  # its assertions not found again (yet)
    partner: _New | None = None
    renamed: bool = False  # found in a test of another name (renamed, or merged into it)


@dataclass(eq=False)
class _New:
    unit: Unit
    free: list[Assertion]  # its assertions no unit before has claimed (yet)
    matched: bool = False
    claimed_body: bool = False  # an assertion-less test was renamed to it


@dataclass(frozen=True)
class _Gain:
    """An assertion a test gained, and the file it is in."""

    path: str
    assertion: Assertion


def _take(counter: Counter[str], key: str) -> bool:
    if counter[key] > 0:
        counter[key] -= 1
        return True
    return False


def _cancel(old: _Old, new: _New) -> None:
    """An assertion on both sides was kept (moved or reflowed inside the unit)."""
    same = Counter(a.key for a in old.left) & Counter(a.key for a in new.free)
    keep_old, keep_new = Counter(same), Counter(same)
    old.left = [a for a in old.left if not _take(keep_old, a.key)]
    new.free = [a for a in new.free if not _take(keep_new, a.key)]


def _match(olds: list[_Old], news: list[_New]) -> None:
    """Each unit before to the same unit after: same file and name, then same name anywhere."""
    for same_file in (True, False):
        waiting: dict[tuple[str, str], list[_New]] = {}
        for new in news:
            if not new.matched:
                key = (new.unit.path if same_file else "", new.unit.name)
                waiting.setdefault(key, []).append(new)
        for old in olds:
            if old.partner is not None or (not same_file and not old.unit.name):
                continue
            queue = waiting.get((old.unit.path if same_file else "", old.unit.name))
            if queue:
                old.partner = queue.pop(0)
                old.partner.matched = True
                _cancel(old, old.partner)


# A new test before one matched already, the same file before another.
_PREFERENCE = ((False, True), (False, False), (True, True), (True, False))


def _holder(old: _Old, holders: dict[str, list[_New]]) -> _New | None:
    """The test after that holds every assertion ``old`` lost, by ``_PREFERENCE``."""
    need = Counter(a.key for a in old.left)
    cands = holders.get(min(need, key=lambda k: len(holders.get(k, ()))), [])
    return next(
        (
            n
            for matched, same_file in _PREFERENCE
            for n in cands
            if n.matched == matched
            and (n.unit.path == old.unit.path) == same_file
            and not need - Counter(a.key for a in n.free)
        ),
        None,
    )


def _rename(olds: list[_Old], news: list[_New]) -> None:
    """A test gone by name is renamed (or merged) when one test after holds all of its
    assertions that test did not have before, or, having none, when a new test has its very
    body."""
    holders: dict[str, list[_New]] = {}  # tests after by the keys of their free assertions
    bodies: dict[str, list[_New]] = {}  # new tests by body
    for new in news:
        if new.unit.is_test:
            for key in {a.key for a in new.free}:
                holders.setdefault(key, []).append(new)
            if not new.matched:
                bodies.setdefault(new.unit.body, []).append(new)
    for old in olds:
        if old.partner is not None or not old.unit.is_test:
            continue
        if old.left:
            holder = _holder(old, holders)
            if holder is not None:
                keys = {a.key for a in old.left}
                _cancel(old, holder)
                old.renamed = True
                for key in keys:  # a test no longer holding a key is no candidate for it
                    if all(a.key != key for a in holder.free):
                        holders[key].remove(holder)
        elif old.unit.body:
            same = (n for n in bodies.get(old.unit.body, []) if not n.claimed_body)
            if (twin := next(same, None)) is not None:
                twin.claimed_body = old.renamed = True


def _credit_helpers(olds: list[_Old], news: list[_New]) -> None:
    """An assertion a helper lost is kept when it now sits in a test or another helper:
    inlined or moved, it still runs."""
    holders: dict[str, list[_New]] = {}
    for new in news:
        for key in {a.key for a in new.free}:
            holders.setdefault(key, []).append(new)
    for old in olds:
        if old.unit.is_test or not old.left:
            continue
        kept: list[Assertion] = []
        for a in old.left:
            homes = sorted(holders.get(a.key, []), key=lambda n: n.unit.path != old.unit.path)
            home = next((n for n in homes if any(b.key == a.key for b in n.free)), None)
            if home is None:
                kept.append(a)
            else:
                home.free.remove(next(b for b in home.free if b.key == a.key))
        old.left = kept


def _helpers(units: Iterable[Unit]) -> dict[str, list[Unit]]:
    out: dict[str, list[Unit]] = {}
    for u in units:
        if not u.is_test and u.title:
            out.setdefault(u.title, []).append(u)
    return out


def _reach(test: Unit, helpers: dict[str, list[Unit]], autouse: set[str]) -> set[str]:
    """The helpers and fixtures a test runs: those it names, those they name, and so on, and
    every autouse fixture."""
    seen = set(autouse)
    todo = [name for name in test.uses or () if name in helpers]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [n for u in helpers[name] for n in u.uses or () if n in helpers]
    return seen


class _Gains:
    """What a test checks now that it did not: its own new assertions, and those of the helpers
    it now runs (all of a helper it did not run before, the new ones of one it did). A helper's
    assertion checks every test that runs it, so tests share them; one no test runs checks
    nothing. Read by lines, what a test runs is not known: the code of its file outside any
    test stands in, as a count per file would have it."""

    def __init__(self, olds: Sequence[_Old], news: Sequence[_New]) -> None:
        self.before = _helpers(o.unit for o in olds)
        self.after = _helpers(n.unit for n in news)
        self.autouse_before = {t for t, us in self.before.items() if any(u.autouse for u in us)}
        self.autouse_after = {t for t, us in self.after.items() if any(u.autouse for u in us)}
        self.free = {id(n.unit): n.free for n in news}
        self.outside: dict[str, list[_New]] = {}  # by file: its units other than tests
        for n in news:
            if not n.unit.is_test:
                self.outside.setdefault(n.unit.path, []).append(n)

    def of(self, old: _Old, new: _New) -> list[_Gain]:
        gained = [_Gain(new.unit.path, a) for a in new.free]
        if new.unit.uses is None:
            return gained + [
                _Gain(n.unit.path, a) for n in self.outside.get(new.unit.path, []) for a in n.free
            ]
        ran = _reach(old.unit, self.before, self.autouse_before)
        for name in sorted(_reach(new.unit, self.after, self.autouse_after)):
            for unit in self.after[name]:
                mine = self.free[id(unit)] if name in ran else unit.assertions
                gained += [_Gain(unit.path, a) for a in mine]
        return gained


def _compare(old: _Old, gained: list[_Gain]) -> list[Weakening]:
    """Pair what a unit lost with what it gained, most alike first: a pair is a weakening when
    the new assertion is weaker; a lost one left unpaired was removed. A removed line is shown
    at its line before, an added one at its line after (in the file it is in now)."""
    removed = old.left
    scored = sorted(
        (-SequenceMatcher(None, r.key, g.assertion.key).ratio(), i, j)
        for i, r in enumerate(removed)
        for j, g in enumerate(gained)
    )
    used_r: set[int] = set()
    used_g: set[int] = set()
    found: list[Weakening] = []
    for _, i, j in scored:
        if i in used_r or j in used_g:
            continue
        used_r.add(i)
        used_g.add(j)
        r, g = removed[i], gained[j]
        if g.assertion.rank < r.rank:
            text = snippet(f"{g.assertion.text} (was: {r.text})")
            found.append(Weakening("ASSERT_LOOSENED", g.path, g.assertion.line, text, "assert"))
    found += [
        Weakening("ASSERT_REMOVED", old.unit.path, r.line, snippet(r.text), "assert")
        for i, r in enumerate(removed)
        if i not in used_r
    ]
    return found


def judge(before: Sequence[Unit], after: Sequence[Unit]) -> list[Weakening]:
    """The weakenings from ``before`` to ``after``: the units of the test files the diff
    touches (a renamed file's units before carry its new path)."""
    olds = [_Old(u, list(u.assertions)) for u in before]
    news = [_New(u, list(u.assertions)) for u in after]
    _match(olds, news)
    _rename(olds, news)
    _credit_helpers(olds, news)
    gains = _Gains(olds, news)
    found: list[Weakening] = []
    for old in olds:
        unit = old.unit
        if old.partner is not None and old.left:
            partner = old.partner
            if unit.is_test:
                found += _compare(old, gains.of(old, partner))
            else:
                found += _compare(old, [_Gain(partner.unit.path, a) for a in partner.free])
        elif old.partner is None and unit.is_test and not old.renamed:
            # The body of a deleted test is this one row, not one row per assertion.
            found.append(
                Weakening("TEST_DELETED", unit.path, unit.line, snippet(unit.header), unit.title)
            )
        elif old.partner is None and not unit.is_test:
            found += [
                Weakening("ASSERT_REMOVED", unit.path, a.line, snippet(a.text), "assert")
                for a in old.left
            ]
    return found

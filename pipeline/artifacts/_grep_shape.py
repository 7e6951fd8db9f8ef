"""How much a regular expression can backtrack, read from its parse tree.

Grep runs a model-written pattern over every line of a body. The time-limited `regex` module is
safe for any pattern but several times slower than the stdlib `re`, which cannot be interrupted.
`re` is safe whenever the work of one search is provably bounded, and that bound is what this
module computes (see ``pipeline/artifacts/_grep.py`` for how grep uses it):

- a repeat (``*``, ``+``, ``{m,n}`` with ``n > 1``) inside another repeat, an alternation inside
  a repeat, a back-reference or a conditional group can backtrack exponentially: no bound;
- otherwise a search of a line of ``n`` characters takes at most about
  ``(n + 1) ** (degree + 1) * factor`` steps, where ``degree`` counts the unbounded (or larger
  than 64) repeats and ``factor`` multiplies the spans of the small bounded ones and the
  alternatives of each alternation.

The parse uses the stdlib's own parser (``re._parser``), so the shape is that of the pattern
`re` would run.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

__all__ = ["PatternShape", "pattern_shape", "required_literal"]

_SMALL_REPEAT = 64
_MAX_FACTOR = 1 << 16
_REPEATS = frozenset(("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"))
_UNBOUNDED_REFS = frozenset(("GROUPREF", "GROUPREF_IGNORE", "GROUPREF_EXISTS",
                             "GROUPREF_LOC_IGNORE", "GROUPREF_UNI_IGNORE"))
_sre: Any = importlib.import_module("re._parser")  # the stdlib's own pattern parser


@dataclass(frozen=True, slots=True)
class PatternShape:
    """The backtracking bound of a pattern: ``(n + 1) ** (degree + 1) * factor`` steps a line."""

    degree: int
    """Unbounded (or large) repeats in the pattern."""

    factor: int
    """Product of the small repeats' spans and the alternations' sizes."""

    def steps(self, length: int) -> int:
        """Return the bound on the steps of one search of a line of ``length`` characters."""
        steps: int = (length + 1) ** (self.degree + 1) * self.factor
        return steps


class _Unbounded(Exception):
    """The pattern can backtrack exponentially."""


def pattern_shape(pattern: str, flags: int) -> PatternShape | None:
    """Return the shape of ``pattern`` for `re`, or None when its backtracking has no bound.

    None too when `re` cannot parse it (a pattern only the `regex` module reads).
    """
    try:
        tree = _sre.parse(pattern, flags)
    except Exception:  # re.error, or a recursion error on absurd nesting
        return None
    counts = [0, 1]
    try:
        _walk(tree, False, counts)
    except _Unbounded:
        return None
    if counts[1] > _MAX_FACTOR:
        return None
    return PatternShape(counts[0], counts[1])


def _walk(items: Any, in_repeat: bool, counts: list[int]) -> None:
    for op, av in items:
        name = str(op)
        if name in _REPEATS:
            low, high, body = av
            if high > 1:
                if in_repeat:
                    raise _Unbounded
                if high > _SMALL_REPEAT:  # MAXREPEAT (no upper bound) is larger still
                    counts[0] += 1
                else:
                    counts[1] *= high - low + 1
                _walk(body, True, counts)
            else:
                _walk(body, in_repeat, counts)
        elif name == "BRANCH":
            if in_repeat:
                raise _Unbounded
            counts[1] *= len(av[1])
            for alternative in av[1]:
                _walk(alternative, in_repeat, counts)
        elif name == "SUBPATTERN":
            _walk(av[-1], in_repeat, counts)
        elif name in ("ASSERT", "ASSERT_NOT"):
            _walk(av[1], in_repeat, counts)
        elif name == "ATOMIC_GROUP":
            _walk(av, in_repeat, counts)
        elif name in _UNBOUNDED_REFS:
            raise _Unbounded
        # LITERAL, NOT_LITERAL, IN, ANY, AT, CATEGORY, RANGE...: one step each


def required_literal(pattern: str, flags: int) -> str | None:
    """Return the longest run of literal characters every match must contain, or None.

    Only the pattern's top-level sequence (and unquantified groups in it) is read; None when it
    has no literal, when `re` cannot parse it, or when a flag (``i``) changes what a literal
    matches.
    """
    if flags & _sre.SRE_FLAG_IGNORECASE:
        return None
    try:
        tree = _sre.parse(pattern, flags)
    except Exception:
        return None
    if tree.state.flags & _sre.SRE_FLAG_IGNORECASE:  # an inline (?i)
        return None
    best = ""
    run: list[str] = []
    for op, av in _flatten(tree):
        if str(op) == "LITERAL":
            run.append(chr(av))
            continue
        if len(run) > len(best):
            best = "".join(run)
        run = []
    if len(run) > len(best):
        best = "".join(run)
    return best or None


def _flatten(items: Any) -> list[tuple[Any, Any]]:
    flat: list[tuple[Any, Any]] = []
    for op, av in items:
        if str(op) == "SUBPATTERN" and not av[1] and not av[2]:  # a group without flag changes
            flat.extend(_flatten(av[-1]))
        else:
            flat.append((op, av))
    return flat

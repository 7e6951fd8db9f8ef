"""Resolving `TurnRunner(middleware=[...])` items into ordered onions, one per stage."""

from __future__ import annotations

from collections.abc import Sequence

from ._onion import Onion
from ._record_keepers import RecordKeeper
from ._stages import STAGES, EventObserver, MiddlewareProvider, MiddlewareSpec, Stage

__all__ = ["build_onions", "resolve_item"]


def resolve_item(item: object) -> list[MiddlewareSpec]:
    """Return the specs an item contributes, in registration order.

    Raises:
        TypeError: the item is neither a provider nor an instance with registered methods.
    """
    if isinstance(item, MiddlewareProvider):
        specs = list(item.middleware_specs())
    else:
        specs = []
        seen: set[str] = set()
        for klass in reversed(type(item).__mro__):
            for attr, value in vars(klass).items():
                regs = getattr(value, "__loopware_registrations__", None)
                if regs is None or attr in seen:
                    continue
                seen.add(attr)
                # the most-derived definition of the method wins
                regs = getattr(getattr(type(item), attr), "__loopware_registrations__", regs)
                specs.extend(reg.bind(item) for reg in regs)
        if not specs and not isinstance(item, EventObserver | RecordKeeper):
            raise TypeError(
                f"{item!r} is not middleware: pass a middleware.Middleware set or an instance "
                "of a class whose methods are decorated with middleware stage decorators (or "
                "an event observer or record keeper)"
            )
    for spec in specs:
        if not _valid_spec(spec):
            raise TypeError(f"{item!r} produced an invalid middleware spec: {spec!r}")
    return specs


def _valid_spec(spec: object) -> bool:
    """A spec the runner can order and run: known stage, str name, callable, int order."""
    if not isinstance(spec, MiddlewareSpec):
        return False
    stage: object = spec.stage  # the fields are typed, but a provider may build anything
    name: object = spec.name
    order: object = spec.order
    fn: object = spec.fn
    check: object = spec.check
    return (
        stage in STAGES
        and isinstance(name, str)
        and callable(fn)
        and type(order) is int
        and (check is None or callable(check))
    )


def build_onions(resolved: Sequence[Sequence[MiddlewareSpec]]) -> dict[Stage, Onion]:
    """Order every stage's middleware by (order, list position, registration order).

    ``resolved`` holds each item's specs (from `resolve_item`), in the runner's list order.
    """
    ranked: dict[Stage, list[tuple[int, int, int, MiddlewareSpec]]] = {s: [] for s in STAGES}
    for position, specs in enumerate(resolved):
        for index, spec in enumerate(specs):
            ranked[spec.stage].append((spec.order, position, index, spec))
    onions: dict[Stage, Onion] = {}
    for stage, entries in ranked.items():
        entries.sort(key=lambda e: (e[0], e[1], e[2]))
        ordered = [e[3] for e in entries]
        onions[stage] = Onion(
            [s.fn for s in ordered], [s.name for s in ordered], [s.check for s in ordered]
        )
    return onions

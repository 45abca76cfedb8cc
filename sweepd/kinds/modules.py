"""Each kind's module of a given name, found without importing the registry.

Its own module, importing nothing of sweepd: every simulated job's process (`python -m
sweepd.sim`) asks for the kinds' simulator hooks, and importing the registry (the kind API,
the spec models, the store's rows) cost each of those processes about 0.2 s of CPU.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from functools import cache
from types import ModuleType


@cache
def kind_modules(name: str) -> tuple[ModuleType, ...]:
    """Each kind's module `name` (e.g. `sim.hook`: what the kind adds to the simulator), of
    the kinds that have one, without importing their `kind.py`: a simulated job's process
    asks for its hooks, not for every kind's planner. Only here and in the registry is a
    kind imported by name."""
    import sweepd.kinds as package

    found: list[ModuleType] = []
    for info in pkgutil.iter_modules(package.__path__):
        if not info.ispkg:
            continue
        full = f"{package.__name__}.{info.name}.{name}"
        try:
            spec = importlib.util.find_spec(full)
        except ModuleNotFoundError:   # a parent package of `name` the kind lacks
            continue
        if spec is not None:
            found.append(importlib.import_module(full))
    return tuple(found)

"""What other kinds may read of model perf's results: typed calls, so that no other kind
reads its sweeps by their kind's name and verdict keys (the layering test allows another
kind this module alone)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sweepd.store.states import SweepState
from sweepd.util.hostlists import expand_nodes

if TYPE_CHECKING:
    from sweepd.store.rows import Sweep
    from sweepd.store.store import Store

NAME = "model-perf"   # the kind's name (kind.py registers it)
BATCH = "per_device_batch_size"


@dataclass(frozen=True)
class Optimum:
    """A finished, settled model perf sweep's optimum: an integer best value (the batch size
    searched by default) and the sweep that found it."""

    sweep: int
    best: int
    tgs: float | None = None   # its measured TGS/device (None: not recorded)


async def latest_optimum(store: Store, model: str, nodes: int,
                         parallelism: str | None = None) -> Optimum | None:
    """The latest finished model perf sweep of `model` on `nodes` nodes whose verdict is
    settled with an integer best (None: there is none). Given a parallelism, a sweep that
    ran the same one comes first, one that named none (the config's own axes) next; one of
    another parallelism never counts: its memory and speed are another cell's."""
    want = _axes(parallelism)
    unnamed: Optimum | None = None
    # The store's pick (done, this kind, this model, a best, not unsettled) is a superset
    # of what counts here: every other done sweep goes unread.
    for sweep in reversed(await store.sweeps.settled_of_model(NAME, model)):
        verdict = sweep.verdict or {}
        if sweep.spec.get("model") != model \
                or not verdict.get("settled", True) or not isinstance(verdict.get("best"), int):
            continue
        count = verdict.get("nodes") or len(expand_nodes(str(sweep.spec.get("nodes", ""))))
        if int(count) != nodes:
            continue
        found = Optimum(sweep.id, int(verdict["best"]))
        ran = _axes(sweep.spec.get("parallelism"))
        if want is None or ran == want:
            return found
        if ran is None and unnamed is None:
            unnamed = found
    return unnamed


def _axes(text: object) -> frozenset[tuple[str, int]] | None:
    """A parallelism's axes whatever their order or case (None: none named)."""
    from sweepd.kinds.model_perf.spec import parse_parallelism

    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return frozenset(parse_parallelism(text).items())
    except ValueError:  # not a model perf parallelism: matches nothing model perf ran
        return frozenset({(text, 0)})


def optimum_of(sweep: Sweep) -> Optimum | None:
    """This finished model perf sweep's integer optimum (a campaign's batch stage), settled
    or not (None: not a model perf sweep, not done, or no integer best)."""
    verdict = sweep.verdict or {}
    if sweep.kind != NAME or sweep.state != SweepState.DONE \
            or not isinstance(verdict.get("best"), int):
        return None
    tgs = verdict.get("tgs")
    return Optimum(sweep.id, int(verdict["best"]),
                   float(tgs) if isinstance(tgs, int | float) else None)


def write_batch(path: Path, value: int, note: str) -> str:
    """`per_device_batch_size: value  # note` into a `<model>.gpu.yml` through the person's
    files' safe edit (model perf's own `--apply`); returns the line written. YAML cannot
    guard a value by parallelism, so `note` says where it was found. ValueError: refused."""
    from sweepd.kinds.model_perf.hooks import apply_to_config

    return apply_to_config(path, BATCH, value, note)

"""Hand-built XLA tuning cells the Wave 6 tests share."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.catalog.catalog import Parallelism
from sweepd.kinds.xla_tuning.catalog.defaults import fsdp8
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog
from sweepd.kinds.xla_tuning.catalog.landscape import Effect, Landscape
from sweepd.kinds.xla_tuning.inputs import Inputs

NCH8 = "NCCL_NCHANNELS_PER_NET_PEER=8"


def nccl_win_on_sparse(dense: float, drift: float = 0.0) -> tuple[Landscape, Inputs]:
    """FSDP=8, sparse (primary) and dense: a +7 % NCCL flag whose factor on dense is
    `dense`, 0.8 % noise, no flakes; with the default inputs over the shipped catalog."""
    land = Landscape(parallelism="FSDP=8", tags=("sparse", "dense"),
                     base_tgs={"sparse": 1000.0, "dense": 1100.0},
                     effects={NCH8: Effect(tgs=1.07)},
                     tag_effects={"dense": {NCH8: Effect(tgs=dense)}},
                     noise=0.008, flake_rate=0.0, evidence=fsdp8().evidence, drift=drift)
    par = Parallelism.parse(land.parallelism)
    return land, Inputs(par, default_catalog(par), tags=land.tags)

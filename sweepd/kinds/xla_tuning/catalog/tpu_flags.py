"""The TPU catalog: XLA flags libtpu reads from LIBTPU_INIT_ARGS (not XLA_FLAGS).

Only names public MaxText / JAX TPU scripts pass (MaxText's end_to_end/tpu scripts and
configs, its xla_flags module, JAX TPU reproducibility recipes), so libtpu accepts them;
libtpu stops at start on any other name (`ERROR: Unknown command line flag 'NAME'`), so a
TPU spec naming one is refused at validate and submit (`unknown_names`).
Measured on one v5e chip (0.27 B llama2-style model, 2026-12): the scoped VMEM limit at
98304 KiB moved throughput -3.7 % at batch 8 and +1.8 % at batch 24 (compile 58-66 s); the
latency hiding scheduler either way changed nothing. The collective flags matter across
chips only; on one chip they are expected flat.
"""

from __future__ import annotations

from sweepd.kinds.xla_tuning.catalog.catalog import Mechanism, Parallelism, Profile, applies
from sweepd.kinds.xla_tuning.catalog.flags import Family

FLAGS_VAR = "LIBTPU_INIT_ARGS"
VMEM_LIMIT = "xla_tpu_scoped_vmem_limit_kib"

TPU_FAMILIES: tuple[Family, ...] = (
    # Scoped VMEM (KiB) a fusion may use: more lets bigger tiles fit, at some schedules' cost.
    Family("vmem", (VMEM_LIMIT,), Mechanism.MEMORY, ("16384", "32768", "65536", "98304")),
    Family("tlhs", ("xla_tpu_enable_latency_hiding_scheduler",), Mechanism.SCHEDULER,
           ("true",)),
    Family("tlhs0", ("xla_tpu_enable_latency_hiding_scheduler",), Mechanism.SCHEDULER,
           ("false",)),
    Family("acf", ("xla_tpu_enable_async_collective_fusion",), Mechanism.OVERLAP, ("true",)),
    Family("acfag", ("xla_tpu_enable_async_collective_fusion",
                     "xla_tpu_enable_async_collective_fusion_fuse_all_gather"),
           Mechanism.OVERLAP, ("true",)),
    Family("occ", ("xla_tpu_overlap_compute_collective_tc",), Mechanism.OVERLAP, ("true",)),
    Family("dpar", ("xla_tpu_enable_data_parallel_all_reduce_opt",
                    "xla_tpu_data_parallel_opt_different_sized_ops"), Mechanism.COMBINE,
           ("true",)),
    Family("aag", ("xla_enable_async_all_gather",), Mechanism.SCHEDULER, ("true",)),
    Family("acp", ("xla_enable_async_collective_permute",), Mechanism.P2P, ("true",)),
)
# Every flag name a TPU spec may use (the catalog's keys).
KNOWN: frozenset[str] = frozenset(k for f in TPU_FAMILIES for k in f.keys)


def tpu_catalog(par: Parallelism) -> tuple[Profile, ...]:
    """Every TPU family that applies to the parallelism, expanded (one profile per value)."""
    return tuple(p for f in TPU_FAMILIES if applies(f.mechanism, par) for p in f.profiles())


def unknown_names(keys: list[str]) -> list[str]:
    """The XLA flag names (`xla_*`) libtpu would refuse: not in the TPU catalog."""
    return [k for k in keys if k.startswith("xla_") and k not in KNOWN]

"""The catalog's entries, from the real 72-profile sweep (xla-tuning-facts.md), and the image.

`default_catalog(par)` expands each family into profiles: one per value, in value order.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweepd.kinds.xla_tuning.catalog.catalog import (
    Axis,
    Layer,
    Mechanism,
    Parallelism,
    Profile,
    Setting,
    applies,
    bubble,
)

MIB = 1 << 20
GIB = 1 << 30
AG = "xla_gpu_all_gather_combine_threshold_bytes"
RS = "xla_gpu_reduce_scatter_combine_threshold_bytes"
OVERLAP_LIMIT = "xla_gpu_experimental_parallel_collective_overlap_limit"
MEM_FRACTION = "XLA_PYTHON_CLIENT_MEM_FRACTION"

# The image's inherited XLA_FLAGS (every job log prints them) and the toolkit's env defaults.
IMAGE_DEFAULTS: dict[str, str] = {
    AG: str(8 * GIB),
    RS: str(8 * GIB),
    "xla_gpu_enable_latency_hiding_scheduler": "True",
    "xla_gpu_memory_limit_slop_factor": "95",
    "xla_gpu_enable_triton_gemm": "False",
    "xla_gpu_enable_cublaslt": "True",
    "xla_gpu_autotune_level": "0",
    "xla_gpu_enable_all_gather_combine_by_dim": "FALSE",
    "xla_gpu_enable_command_buffer": "''",
    MEM_FRACTION: ".93",
    "NCCL_NCHANNELS_PER_NET_PEER": "4",
    "NCCL_IB_QPS_PER_CONNECTION": "4",
}
# Defaults that hold where the image sets nothing: XLA's own (xla/debug_options_flags.cc,
# DefaultDebugOptionsIgnoringFlags) and NCCL's documented ones. An env file's flag is put
# back to one by appending it (last wins), which takes the flag out. Only those unchanged
# across releases: XLA turned highest_priority_async_stream, pipelined reduce-scatter and
# multi-streamed windowed einsum on by default in later releases, so their default depends
# on the image and removing them stays unmeasured (`unrestorable`).
BUILTIN_DEFAULTS: dict[str, str] = {
    "xla_gpu_enable_while_loop_double_buffering": "false",
    "xla_gpu_enable_pipelined_all_gather": "false",
    "xla_gpu_enable_pipelined_all_reduce": "false",
    "xla_gpu_enable_pipelined_p2p": "false",
    OVERLAP_LIMIT: "1",
    "xla_gpu_collective_permute_decomposer_threshold": str(2**63 - 1),
    "xla_gpu_threshold_for_windowed_einsum_mib": "100000",
    "NCCL_BUFFSIZE": str(4 * MIB),
}
_THRESHOLDS = tuple(str(b) for b in (256 * MIB, 384 * MIB, 512 * MIB, 768 * MIB, GIB, 2 * GIB,
                                     4 * GIB))


@dataclass(frozen=True)
class Family:
    code: str  # short profile-name prefix (job names stay short)
    keys: tuple[str, ...]  # set together to the same value
    mechanism: Mechanism
    values: tuple[str, ...]
    layer: Layer = Layer.XLA

    def profiles(self) -> tuple[Profile, ...]:
        numeric = len(self.values) > 1
        return tuple(
            Profile(
                f"{self.code}{short(v)}" if numeric else self.code,
                tuple(Setting(k, v, self.layer) for k in self.keys),
                frozenset({self.mechanism}),
                family=self.code,
                position=i,
            )
            for i, v in enumerate(self.values)
        )


FAMILIES: tuple[Family, ...] = (
    Family("ag", (AG,), Mechanism.COMBINE, _THRESHOLDS),
    Family("rs", (RS,), Mechanism.COMBINE, _THRESHOLDS),
    Family("agrs", (AG, RS), Mechanism.COMBINE, _THRESHOLDS),
    Family("dbuf", ("xla_gpu_enable_while_loop_double_buffering",), Mechanism.OVERLAP, ("true",)),
    Family("pag", ("xla_gpu_enable_pipelined_all_gather",), Mechanism.OVERLAP, ("true",)),
    Family("prs", ("xla_gpu_enable_pipelined_reduce_scatter",), Mechanism.OVERLAP, ("true",)),
    Family("par", ("xla_gpu_enable_pipelined_all_reduce",), Mechanism.OVERLAP, ("true",)),
    Family("hpas", ("xla_gpu_enable_highest_priority_async_stream",), Mechanism.SCHEDULER,
           ("true",)),
    Family("ovl", (OVERLAP_LIMIT,), Mechanism.SCHEDULER, ("2", "4", "8")),
    Family("lhs", ("xla_gpu_enable_latency_hiding_scheduler",), Mechanism.SCHEDULER, ("true",)),
    Family("pp2p", ("xla_gpu_enable_pipelined_p2p",), Mechanism.P2P, ("true",)),
    Family("cpd", ("xla_gpu_collective_permute_decomposer_threshold",), Mechanism.P2P,
           (str(256 * MIB), str(GIB))),
    Family("wein", ("xla_gpu_multi_streamed_windowed_einsum",), Mechanism.MATMUL, ("true",)),
    Family("wein0", ("xla_gpu_threshold_for_windowed_einsum_mib",), Mechanism.MATMUL, ("0",)),
    Family("nbuf", ("NCCL_BUFFSIZE",), Mechanism.TRANSPORT, (str(16 * MIB),), Layer.ENV),
    Family("nch8", ("NCCL_NCHANNELS_PER_NET_PEER",), Mechanism.TRANSPORT, ("8",), Layer.ENV),
    Family("qps8", ("NCCL_IB_QPS_PER_CONNECTION",), Mechanism.TRANSPORT, ("8",), Layer.ENV),
    Family("protoS", ("NCCL_PROTO",), Mechanism.TRANSPORT, ("Simple",), Layer.ENV),
    Family("mem95", (MEM_FRACTION,), Mechanism.MEMORY, (".95",), Layer.ENV),
)


def short(value: str) -> str:
    """`1073741824` -> `1G`, `402653184` -> `384M`; anything else as it is."""
    if not value.isdigit() or int(value) < MIB:
        return value
    n = int(value)
    return f"{n // GIB}G" if n % GIB == 0 else f"{n // MIB}M"


def pipeline_family(stages: int, microbatches: int) -> tuple[Profile, ...]:
    """Wave 5 (PP only): more microbatches, then virtual stages; bubble in the name's docs."""
    out: list[Profile] = []
    for i, m in enumerate((2 * microbatches, 4 * microbatches)):
        out.append(Profile(f"mb{m}", (Setting("num_pipeline_microbatches", str(m),
                                              Layer.MAXTEXT),),
                           frozenset({Mechanism.PIPELINE}), family="mb", position=i))
    out.append(Profile("v2", (Setting("num_layers_per_pipeline_stage", "2", Layer.MAXTEXT),),
                       frozenset({Mechanism.PIPELINE}), family="v"))
    assert bubble(stages, 2 * microbatches) < bubble(stages, microbatches)
    return tuple(out)


def default_catalog(par: Parallelism, microbatches: int | None = None) -> tuple[Profile, ...]:
    """Every family that applies to the parallelism, expanded; Wave 5 shapes for PP."""
    out = [p for f in FAMILIES if applies(f.mechanism, par) for p in f.profiles()]
    stages = par.degree(Axis.PP)
    if stages > 1:
        out += pipeline_family(stages, microbatches or stages)
    return tuple(out)


def default_value(key: str) -> str | None:
    """What a job runs with where nothing sets `key`: the image's value, else XLA's or
    NCCL's own; None where it is not known."""
    return IMAGE_DEFAULTS.get(key, BUILTIN_DEFAULTS.get(key))


def same_value(a: str, b: str) -> bool:
    """XLA reads a boolean flag's value in any case (the image itself writes `True` and
    `FALSE`)."""
    if a.lower() in ("true", "false") and b.lower() in ("true", "false"):
        return a.lower() == b.lower()
    return a == b


def unrestorable(deployed: tuple[Setting, ...]) -> tuple[Setting, ...]:
    """What the env file sets that restore_default cannot put back: no default is known
    to append (a flag cannot be taken out of XLA_FLAGS by appending), so removing it is
    never measured."""
    return tuple(s for s in deployed if default_value(s.key) is None)


def restore_default(deployed: tuple[Setting, ...]) -> Profile | None:
    """Every flag the env file sets put back to the default a job has without it
    (`default_value`: the image's, else XLA's or NCCL's own), by last-wins append."""
    back = tuple(Setting(s.key, d, s.layer) for s in deployed for d in [default_value(s.key)]
                 if d is not None and not same_value(d, s.value))
    if not back:
        return None
    mechs = frozenset(m for f in FAMILIES for m in [f.mechanism]
                      if any(s.key in f.keys for s in back))
    return Profile("restore_default", back, mechs, family="restore_default")


"""The HLO text a simulated evidence run dumps (`--xla_dump_to` with `--xla_dump_hlo_as_text`).

A scan over the layers is a while loop whose body holds the per-layer collectives; their
sizes are chosen so that, at `logread`'s nominal bandwidths, each cost takes the share of
the step the landscape's `evidence` gives it. Compute and the pipeline bubble leave no
collective behind: they are the rest of the step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from sweepd.kinds.xla_tuning.catalog.catalog import Cost
from sweepd.kinds.xla_tuning.evidence.logread import DCN_GBPS, GPUS_PER_NODE, ICI_GBPS

FILE_NAME = "module_0421.jit_train_step.gfx950_gpu_after_optimizations.txt"
# libtpu's name for the same module (seen on the v5e chip, JAX 0.10.2, MaxText's train step).
TPU_FILE_NAME = "module_0098.jit_train_step.cl_933746096.after_optimizations.txt"
WIDTH = 7168  # the trailing dimension of every simulated buffer (a d_model)
_OPS: dict[Cost, tuple[str, bool]] = {  # cost -> (op, crosses nodes)
    Cost.ALL_GATHER: ("all-gather", True),
    Cost.REDUCE_SCATTER: ("reduce-scatter", True),
    Cost.ALL_REDUCE: ("all-reduce", True),
    Cost.COLLECTIVE_PERMUTE: ("collective-permute", True),
    Cost.ICI_COLLECTIVES: ("all-gather", False),
    Cost.ALL_TO_ALL: ("all-to-all", True),
}


def _groups(nodes: int, dcn: bool) -> str:
    if dcn:
        sets = [[g + GPUS_PER_NODE * n for n in range(nodes)] for g in range(GPUS_PER_NODE)]
    else:
        sets = [[GPUS_PER_NODE * n + g for g in range(GPUS_PER_NODE)] for n in range(nodes)]
    return "{" + ",".join("{" + ",".join(map(str, s)) + "}" for s in sets) + "}"


def _pairs(nodes: int) -> str:
    ranks = GPUS_PER_NODE * nodes
    return "{" + ",".join(f"{{{r},{(r + GPUS_PER_NODE) % ranks}}}" for r in range(ranks)) + "}"


def _rows(total_bytes: float, trips: int) -> int:
    return max(1, round(total_bytes / trips / 2 / WIDTH))


def _op_lines(i: int, cost: Cost, rows: int, nodes: int) -> list[str]:
    op, dcn = _OPS[cost]
    big = f"bf16[{rows},{WIDTH}]{{1,0}}"
    small = f"bf16[{max(1, math.ceil(rows / max(1, nodes)))},{WIDTH}]{{1,0}}"
    name = f"%{op}.{i}"
    if op == "collective-permute":
        return [f"  {name} = ({big}, {big}, u32[], u32[]) collective-permute-start({big} "
                f"%fusion.{i}), channel_id={i}, source_target_pairs={_pairs(nodes)}",
                f"  {name}.done = {big} collective-permute-done({name})"]
    attrs = f"channel_id={i}, replica_groups={_groups(nodes, dcn)}, use_global_device_ids=true"
    if op == "all-gather":
        return [f"  {name} = ({small}, {big}) all-gather-start({small} %fusion.{i}), "
                f"{attrs}, dimensions={{0}}",
                f"  {name}.done = {big} all-gather-done({name})"]
    if op == "all-reduce":
        return [f"  {name} = {big} all-reduce-start({big} %fusion.{i}), {attrs}, "
                f"to_apply=%add.clone",
                f"  {name}.done = {big} all-reduce-done({name})"]
    if op == "reduce-scatter":
        return [f"  {name} = {small} reduce-scatter({big} %fusion.{i}), {attrs}, "
                f"dimensions={{0}}, to_apply=%add.clone"]
    return [f"  {name} = {big} all-to-all({big} %fusion.{i}), {attrs}, dimensions={{0}}"]


def hlo_text(evidence: Mapping[Cost, float], step_s: float, nodes: int, layers: int) -> str:
    """The after-optimizations module of `jit_train_step` for this evidence."""
    trips = max(1, layers)
    body: list[str] = []
    for i, (cost, share) in enumerate(sorted(evidence.items()), start=1):
        if cost not in _OPS or share <= 0:
            continue
        gbps = ICI_GBPS if cost is Cost.ICI_COLLECTIVES else DCN_GBPS
        rows = _rows(share * step_s * gbps * 1e9, trips)
        body.append(f"  %fusion.{i} = bf16[{rows},{WIDTH}]{{1,0}} fusion(%param.1), "
                    f"kind=kLoop, calls=%fused_computation.{i}")
        body += _op_lines(i, cost, rows, nodes)
    state = f"(s32[], bf16[{WIDTH}]{{0}})"
    return "\n".join([
        "HloModule jit_train_step, is_scheduled=true, entry_computation_layout="
        f"{{({state})->{state}}}",
        "",
        "%add.clone (x: bf16[], y: bf16[]) -> bf16[] {",
        "  %x = bf16[] parameter(0)",
        "  %y = bf16[] parameter(1)",
        "  ROOT %add = bf16[] add(%x, %y)",
        "}",
        "",
        f"%while_body.1 (param: {state}) -> {state} {{",
        f"  %param.1 = {state} parameter(0)",
        *body,
        "  %custom-call.1 = bf16[8192,7168]{1,0} custom-call(%param.1), "
        "custom_call_target=\"__cublas$gemm\"",
        f"  ROOT %tuple.1 = {state} tuple(%param.1)",
        "}",
        "",
        f"%while_cond.1 (param.c: {state}) -> pred[] {{",
        f"  %param.c = {state} parameter(0)",
        "  ROOT %lt = pred[] compare(%param.c, %param.c), direction=LT",
        "}",
        "",
        f"ENTRY %main.1 (Arg_0.1: {state}) -> {state} {{",
        f"  %Arg_0.1 = {state} parameter(0)",
        f"  ROOT %while.1 = {state} while(%Arg_0.1), condition=%while_cond.1, "
        f"body=%while_body.1, backend_config={{\"known_trip_count\":{{\"n\":\"{trips}\"}}}}",
        "}",
        "",
    ])

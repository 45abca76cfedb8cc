"""What a tuning job's log and HLO dump say: effective flags, unknown flags, collectives.

Pure functions over text (`jobfacts` folds a job's log lines through them as the monitor
reads them and reads its HLO dump once at its end; the simulator writes them):

- `effective(lines)`: the job's effective `XLA_FLAGS` and env vars, resolved last-wins from
  the lines the toolkit prints (`Extracted env: K=V`, `  export K=V`, `[XLA dump]
  XLA_FLAGS=…`, the `printenv | sort` block after `Show all environment variables:`);
  `assignment(line)` one line's `K=V`, `resolved` the state from the last values kept.
- `unknown_flags(line)`: the flag names of `Unknown flags in XLA_FLAGS: …` (and the older
  `Unknown flag: …`).
- `applied(settings, eff)`: did every setting of the profile win? If not, the culprit.
- `hlo_evidence(text, step_s)`: the collective ops of an after-optimizations HLO dump
  (`module_*.jit_train_step.*after_optimizations.txt`: `..._gpu_after_optimizations.txt` on
  GPU, `....cl_NNN.after_optimizations.txt` from libtpu), counted and sized per step, as an
  `Evidence` (each cost's share of the step, and the count: 0 says the program has none).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Evidence, Layer, Setting
from sweepd.monitor.parse import unquote

XLA_FLAGS = "XLA_FLAGS"
# Where libtpu reads its XLA flags on TPU (a TPU sweep's profiles go there): its flags are
# in effect beside XLA_FLAGS', read after them.
LIBTPU_INIT_ARGS = "LIBTPU_INIT_ARGS"
# Env vars that matter to a tuning run (besides any key a profile names).
ENV_PREFIXES = ("NCCL_", "RCCL_", "XLA_PYTHON_CLIENT_")
_MAX_LINE = 100_000  # a longer line is read up to here: no quadratic work on hostile logs
_RANK = re.compile(r"^(\d+): ")
_ASSIGN = re.compile(
    r"^(?:\[[^\]\n]{0,80}\]\s*|Extracted env:\s*|\s*export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_UNKNOWN = re.compile(r"\bUnknown flags?(?: in [A-Za-z_]\w*)?:\s*(.*)$")


def parse_flags(text: str) -> dict[str, str]:
    """`--k=v --b` -> {k: v, b: "true"}; a repeated flag keeps its last value (XLA's rule)."""
    out: dict[str, str] = {}
    for token in text[:_MAX_LINE].split():
        if not token.startswith("--") or len(token) == 2:
            continue
        key, sep, value = token[2:].partition("=")
        if key:
            out.pop(key, None)  # last wins, and its position moves to the end
            out[key] = value if sep else "true"
    return out


@dataclass(frozen=True)
class Effective:
    """A job's effective settings as its log printed them."""

    xla: dict[str, str] = field(default_factory=dict)  # flag key (no dashes) -> value
    env: dict[str, str] = field(default_factory=dict)  # env var -> value
    xla_text: str | None = None  # the last XLA_FLAGS value printed; None: never printed

    def value(self, setting: Setting) -> str | None:
        if setting.layer is Layer.XLA:
            return self.xla.get(setting.key)
        return self.env.get(setting.key)


def _strip_rank(line: str, rank: int | None) -> str | None:
    """The line without its `srun -l` prefix; None when it belongs to another rank."""
    m = _RANK.match(line)
    if m is None:
        return line
    if rank is not None and int(m.group(1)) != rank:
        return None
    return line[m.end():]


def wanted(key: str, keys: frozenset[str] = frozenset()) -> bool:
    """A printed `K=V` a tuning run follows: XLA_FLAGS, the NCCL/RCCL/XLA_PYTHON_CLIENT
    families, and `keys` (a profile's own env vars)."""
    return key == XLA_FLAGS or key in keys or key.startswith(ENV_PREFIXES)


def assignment(raw: str, rank: int | None = 0) -> tuple[str, str] | None:
    """The `K=V` one line prints (rank `rank`'s, or an unprefixed line), value unquoted."""
    line = _strip_rank(raw[:_MAX_LINE].rstrip("\r\n"), rank)
    if line is None:
        return None
    m = _ASSIGN.match(line)
    if m is None:
        return None
    return m.group(1), unquote(m.group(2).strip())


def resolved(xla_text: str | None, env: Mapping[str, str], keys: Iterable[str] = ()
             ) -> Effective:
    """The effective state from the last XLA_FLAGS printed and each env var's last value,
    keeping the env vars `wanted` with `keys`."""
    follow = frozenset(keys)
    text = with_libtpu(xla_text, env.get(LIBTPU_INIT_ARGS))
    return Effective(parse_flags(text or ""),
                     {k: v for k, v in env.items() if wanted(k, follow)}, text)


def with_libtpu(xla_text: str | None, libtpu: str | None) -> str | None:
    """The flags in effect: XLA_FLAGS', then LIBTPU_INIT_ARGS' (None: neither printed; a
    log without LIBTPU_INIT_ARGS, every GPU job's, reads as XLA_FLAGS alone)."""
    if libtpu is None:
        return xla_text
    return " ".join(p for p in (xla_text or "", libtpu) if p.strip())


def effective(lines: Iterable[str], rank: int | None = 0,
              keys: Iterable[str] = ()) -> Effective:
    """Resolve last-wins over every `K=V` the job printed (rank 0's, or unprefixed lines).

    `keys` adds env vars to follow besides XLA_FLAGS and the NCCL/RCCL/XLA_PYTHON_CLIENT
    families. Each printed XLA_FLAGS is the whole value at that point, so the last one is the
    effective one; inside it, a repeated flag resolves last-wins.
    """
    follow = frozenset(keys)
    env: dict[str, str] = {}
    xla_text: str | None = None
    libtpu: str | None = None
    for raw in lines:
        kv = assignment(raw, rank)
        if kv is not None and kv[0] == LIBTPU_INIT_ARGS:
            libtpu = kv[1]
        if kv is None or not wanted(kv[0], follow):
            continue
        if kv[0] == XLA_FLAGS:
            xla_text = kv[1]
        else:
            env[kv[0]] = kv[1]
    text = with_libtpu(xla_text, libtpu)
    return Effective(parse_flags(text or ""), env, text)


def unknown_flags(line: str) -> tuple[str, ...]:
    """Flag names (`xla_foo`, no dashes or value) an unknown-flag abort line names."""
    m = _UNKNOWN.search(line[:_MAX_LINE])
    if m is None:
        return ()
    names: list[str] = []
    for token in re.split(r"[\s,;]+", m.group(1)):
        name = token.strip("'\".").split("=", 1)[0].lstrip("-")
        if name and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and name not in names:
            names.append(name)
    return tuple(names)


def unknown_flags_in(lines: Iterable[str]) -> tuple[str, ...]:
    """Every unknown flag any line names, first seen first."""
    out: list[str] = []
    for line in lines:
        out += [n for n in unknown_flags(line) if n not in out]
    return tuple(out)


def _same(want: str, got: str) -> bool:
    """XLA reads booleans in any case; `.95` and `0.95` are one fraction."""
    if want.lower() in ("true", "false"):
        return want.lower() == got.lower()
    try:
        return float(want) == float(got)
    except ValueError:
        return want == got


def applied(settings: Sequence[Setting], eff: Effective) -> tuple[bool, str | None]:
    """(True, None) when each XLA/env setting shows its value in the effective state;
    else (False, the first culprit). MaxText overrides ride on the command line, not here."""
    for s in settings:
        if s.layer is Layer.MAXTEXT:
            continue
        if s.layer is Layer.XLA and eff.xla_text is None:
            return False, "the log never printed XLA_FLAGS (the job died before its env dump?)"
        got = eff.value(s)
        if got is None:
            return False, f"{s.key} is not set in the job's effective environment " \
                          f"(profile wants {s.value})"
        if not _same(s.value, got):
            # Only what the log shows: who set the winning value is the gather's to say
            # (it knows what the model's env file sets).
            return False, f"{s.key}={got} won over the profile's {s.value}"
    return True, None


def in_effect(s: Setting, eff: Effective) -> bool:
    """Does the job's effective state show this XLA/env setting's value?"""
    got = eff.value(s)
    return got is not None and _same(s.value, got)


# ---- HLO after optimizations ----------------------------------------------------------------

# Nominal per-rank bandwidths (GB/s) turning bytes into seconds: DCN for cross-node groups,
# ICI for groups inside a node. The simulator writes its dumps with the same figures, so a
# simulated evidence run reads back its landscape's shares; on real dumps they are estimates.
DCN_GBPS = 50.0
ICI_GBPS = 300.0
GPUS_PER_NODE = 8
_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3fnuz": 1,
                "f8e5m2fnuz": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
                "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_OP = re.compile(r"=\s*(\(?[^=]*?\)?)\s+(all-gather|reduce-scatter|all-reduce|all-to-all|"
                 r"ragged-all-to-all|collective-permute)(-start)?\(")
_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,\s]*)\]")
# A computation header starts at column 0 (instructions are indented) and opens a block.
_COMP = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)[ (].*\{\s*$")
_WHILE = re.compile(r"\bwhile\(.*?\bbody=%?([\w.\-]+)")
_TRIP = re.compile(r"known_trip_count\"?\s*:\s*\{\s*\"?n\"?\s*:\s*\"?(\d+)")
_GROUPS = re.compile(r"replica_groups=\{(\{[0-9,\s{}]*\})\}")
_MAX_TRIP = 1_000_000


@dataclass(frozen=True)
class Collective:
    """One kind of collective in the step: how many run and how many bytes they move."""

    cost: Cost
    count: int
    bytes: int


def _shape_bytes(shape: str) -> int:
    """The largest array in a result shape (a `-start` op's tuple holds operand and result)."""
    best = 0
    for m in _ARRAY.finditer(shape[:4000]):
        size = _DTYPE_BYTES.get(m.group(1))
        dims = [d for d in m.group(2).replace(" ", "").split(",") if d]
        if size is None or len(dims) > 12:
            continue
        best = max(best, size * math.prod(min(int(d), 1 << 40) for d in dims))
    return best


def _crosses_nodes(line: str, gpus_per_node: int) -> bool:
    """A group whose members sit on different nodes goes over DCN; none given: DCN."""
    m = _GROUPS.search(line)
    if m is None:
        return True
    for group in re.findall(r"\{([0-9,\s]*)\}", m.group(1))[:4096]:
        ids = {int(x) // gpus_per_node for x in group.replace(" ", "").split(",") if x}
        if len(ids) > 1:
            return True
    return False


def _cost(op: str, line: str, gpus_per_node: int) -> Cost:
    if op in ("all-to-all", "ragged-all-to-all"):
        return Cost.ALL_TO_ALL
    if op == "all-reduce":
        return Cost.ALL_REDUCE
    if op == "collective-permute":
        return Cost.COLLECTIVE_PERMUTE
    if not _crosses_nodes(line, gpus_per_node):
        return Cost.ICI_COLLECTIVES
    return Cost.ALL_GATHER if op == "all-gather" else Cost.REDUCE_SCATTER


def _trip_counts(lines: Sequence[str]) -> dict[str, int]:
    """While bodies and how often each runs per step (one level: nested loops are rare)."""
    trips: dict[str, int] = {}
    for line in lines:
        m = _WHILE.search(line)
        if m:
            t = _TRIP.search(line)
            trips[m.group(1)] = min(int(t.group(1)), _MAX_TRIP) if t else 1
    return trips


def hlo_collectives(text: str, gpus_per_node: int = GPUS_PER_NODE) -> tuple[Collective, ...]:
    """Collective ops per step, grouped by cost; ops in a while body count its trip count."""
    lines = [ln[:_MAX_LINE] for ln in text.splitlines()]
    trips = _trip_counts(lines)
    count: dict[Cost, int] = {}
    size: dict[Cost, int] = {}
    times = 1
    for line in lines:
        comp = _COMP.match(line)
        if comp is not None:
            times = trips.get(comp.group(2), 1)
            continue
        m = _OP.search(line)
        if m is None:
            continue
        cost = _cost(m.group(2), line, gpus_per_node)
        count[cost] = count.get(cost, 0) + times
        # The largest buffer the op touches: its result, or (a reduce-scatter) its operand.
        close = line.find(")", m.end())
        touched = line[m.start(1):close + 1 if close >= 0 else m.end() + 2000]
        size[cost] = size.get(cost, 0) + times * _shape_bytes(touched)
    return tuple(Collective(c, count[c], size[c]) for c in count)


def collective_seconds(c: Collective) -> float:
    gbps = ICI_GBPS if c.cost is Cost.ICI_COLLECTIVES else DCN_GBPS
    return c.bytes / (gbps * 1e9)


def hlo_evidence(text: str, step_s: float | None = None, source: str = "HLO dump",
                 gpus_per_node: int = GPUS_PER_NODE) -> Evidence:
    """Each collective cost's share of the step (bytes at nominal bandwidth / step seconds);
    the rest of the step is compute. Without `step_s`, shares of the collective time alone.
    A pipeline bubble does not show in the HLO (it is idle time): it counts as compute."""
    found = hlo_collectives(text, gpus_per_node)
    seconds: Mapping[Cost, float] = {c.cost: collective_seconds(c) for c in found}
    total = sum(seconds.values())
    if step_s is not None and step_s > 0 and math.isfinite(step_s):
        shares = {c: s / max(step_s, total) for c, s in seconds.items()}
        shares[Cost.COMPUTE] = max(0.0, 1.0 - sum(shares.values()))
    elif not found and is_hlo_module(text):
        shares = {Cost.COMPUTE: 1.0}   # a module with no collective: the step is compute
    else:
        shares = {c: (s / total if total > 0 else 0.0) for c, s in seconds.items()}
    ordered = sorted(shares.items(), key=lambda cs: -cs[1])
    return Evidence(tuple((c, round(s, 4)) for c, s in ordered), source=source,
                    collectives=sum(c.count for c in found))


def is_hlo_module(text: str) -> bool:
    """The text is an HLO module's dump (its first line `HloModule NAME, ...`), not some
    other file a dump directory holds."""
    return text.lstrip()[:10] == "HloModule "

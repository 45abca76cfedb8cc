"""One log line in, one typed fact out (or None). Pure and total: it never raises.

Formats are those of maxtext-slurm-facts.md §2, and real MaxText's on one TPU v5e chip
(reference/tpu/: absl-prefixed step lines with extra fields, the `Total estimated memory
size:` line, `Using (GB) 3.01 / 15.75 (19.11%) on TPU_0(…)`). The parser is stateless, so two
context-dependent lines are accepted wherever they appear:
- `Using (GB) 41.2 / 178.5 (23.08%) on rocm:0` is taken as Memstats without checking that a
  `Memstats: …:` header preceded it (MaxText prints nothing else in that shape);
- `  Status: SUCCESS (exit 0)` is taken as the JOB SUMMARY status without checking that it
  sits inside the summary block. The block's opening rule is reported as
  `BannerFact(stage="JOB SUMMARY", status="BEGIN", detail="")` so a caller can check.

`SignalFact.text` is the line with ANSI codes and CR/LF removed but the `srun -l` rank
prefix kept, so it can be found in the log with `grep -F`.
"""

from __future__ import annotations

import re

from sweepd.monitor.facts import (
    BannerFact,
    ClusterTimeFact,
    CompiledMemoryFact,
    FailureClass,
    HeaderFact,
    LineFact,
    MemstatsFact,
    NodeExitFact,
    SignalFact,
    StepFact,
    SummaryFact,
)
from sweepd.monitor.signatures import (
    FAILING_BANNERS,
    SIGNATURES,
    is_false_positive,
    match_signature,
    oom_sizes,
)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_RANK = re.compile(r"^ *(\d{1,7}): ")
_STEP = re.compile(r"\bcompleted step:\s*(\d+)\s*,(.*)$")
_MEMSTATS = re.compile(r"\bUsing \(GB\) (\d+(?:\.\d+)?) / (\d+(?:\.\d+)?)")
_GB = r"([0-9]{1,7}(?:\.[0-9]{1,6})?) GB"  # ASCII digits only: MaxText prints no others
# The compiled-memory line in both of MaxText's shapes (the same five sizes, in order):
# older builds `Total memory size: …`; newer ones (max_utils.py, seen on TPU)
# `Total estimated memory size: 4.4 GB, estimated output size: 3.0 GB, …, Estimated host
# temp size: 0.0 GB.` (GB as printed, which is GiB).
_COMPILED = (
    re.compile(rf"\bTotal memory size: {_GB}, Output size: {_GB}, Temp size: {_GB}, "
               rf"Argument size: {_GB}, Host temp size: {_GB}\.?\s*$"),
    re.compile(rf"\bTotal estimated memory size: {_GB}, estimated output size: {_GB}, "
               rf"estimated temp size: {_GB}, estimated argument size: {_GB}, "
               rf"Estimated host temp size: {_GB}\.?\s*$"),
)
_COMPILED_KEY = "memory size:"   # in both shapes' first words
_HEADER = re.compile(
    r"^\s*(JOB_ID|JOB_NAME|NNODES|JOB_NODELIST|PASSTHROUGH_ARGS|MODEL_NAME)=(.*)$"
)
_SUMMARY_RULE = re.compile(r"^=+ JOB SUMMARY =+$")
# A JOB SUMMARY's `Cluster time: <start>s to <end>s`: the job's span on the cluster's own
# clock, printed where that clock is not the machine's (the simulated cluster).
_SECONDS = r"([0-9]{1,15}(?:\.[0-9]{1,9})?)s"   # a number `float` reads (the parse never raises)
CLUSTER_TIME = re.compile(rf"^\s*Cluster time: {_SECONDS} to {_SECONDS}$")
_BANNER = re.compile(
    r"^=+ (?P<stage>\S.*?) (?P<status>BEGIN|END|TIMEOUT|FAILED)"
    r"(?: \((?P<detail>[^)]*)\))? =+$"
)
_NODE_EXIT = re.compile(r"\bNODE_EXIT host=(\S+) exit=(-?\d+)\b")
_STATUS = re.compile(
    r"^\s*Status:\s*(SUCCESS|FAILED|CANCELLED)\b\s*(?:\(([^)]*)\))?\s*(?:[\u2014\u2013-]+\s*(.*))?$"
)
_EXIT_IN_PARENS = re.compile(r"\bexit (-?\d+)\b")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
# The rest of a step line as MaxText prints it (maxtext-slurm-facts.md §2; MFU is the
# toolkit's addition; newer builds add fields after the loss, on TPU `, lm_loss: …,
# perplexity: …`, and prefix absl's `I1206 00:23:33.655599 … metric_logger.py:230] `,
# which `_STEP` skips): each number in `_NUMBER`'s syntax, so both readings agree.
_N = f"({_NUMBER.pattern})"
_STEP_USUAL = re.compile(
    rf" seconds: {_N}, TFLOP/s/device: {_N}, (?:MFU: {_N}%, )?Tokens/s/device: {_N}, "
    rf"total_weights: {_NUMBER.pattern}, loss: {_N}(?:, .*)?"
)
# The signatures' needles less those containing another: a line with none of them matches
# no signature (`match_signature` tests each row's needle before its pattern).
_NEEDLES = tuple(sorted(n for n in {s.needle for s in SIGNATURES}
                        if not any(o != n and o in n for o in {s.needle for s in SIGNATURES})))


def _trie_pattern(words: set[str]) -> str:
    """An alternation of `words` as a prefix tree (`ab|ac` as `a(?:b|c)`): it finds a word
    where the plain alternation does, trying one branch per character instead of every word
    at every position."""
    heads: dict[str, set[str]] = {}
    for word in words:
        heads.setdefault(word[:1], set()).add(word[1:])
    branches = []
    for head in sorted(h for h in heads if h):
        rest = heads[head]
        tail = _trie_pattern(rest - {""}) if rest - {""} else ""
        if tail and "" in rest:
            tail = f"(?:{tail})?"
        branches.append(re.escape(head) + tail)
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"


# Whether a lowered line holds any needle, in one search: a third less time than testing the
# forty needles one by one, on every line that is no other fact (most lines of every log).
_ANY_NEEDLE = re.compile(_trie_pattern(set(_NEEDLES)))


def parse_line(raw: str) -> LineFact | None:
    # The line without ANSI codes and CR/LF (`full`), and without its `srun -l` rank prefix
    # (`body`); inline, as the rest: a monitor parses every line of thousands of logs.
    full = (_ANSI.sub("", raw) if "\x1b" in raw else raw).rstrip("\r\n")
    m = _RANK.match(full)
    rank, body = (None, full) if m is None else (int(m.group(1)), full[m.end():])
    if not body.strip():
        return None
    # Each parser only where its keyword is (the same tests they make first): most lines
    # are none of these, and an `in` costs a fraction of a call.
    fact: LineFact | None
    if "completed step:" in body and (fact := _parse_step(rank, body)) is not None:
        return fact
    if "Using (GB)" in body and (fact := _parse_memstats(rank, body)) is not None:
        return fact
    if _COMPILED_KEY in body and (fact := _parse_compiled_memory(rank, body)) is not None:
        return fact
    if (("=" in body or "NODE_EXIT" in body or "Status:" in body or "Cluster time:" in body)
            and (fact := _parse_structured(full, body)) is not None):
        return fact   # `_parse_structured` finds nothing in a line with none of these
    if _ANY_NEEDLE.search(body.lower()) is None:
        return None   # the usual line: no row's needle, so no row's pattern is searched
    return _parse_signal(rank, full, body)


def _number(text: str) -> float | None:
    m = _NUMBER.fullmatch(text.strip().rstrip("%").strip())
    return float(m.group(0)) if m is not None else None


def _parse_step(rank: int | None, body: str) -> StepFact | None:
    # Substring tests first: most lines are none of these, and `in` is far cheaper.
    m = _STEP.search(body) if "completed step:" in body else None
    if m is None:
        return None
    # MaxText's own line, field for field, in one match; anything else is read by name.
    # Both read the same numbers from such a line (the same number syntax, `float`).
    if c := _STEP_USUAL.fullmatch(m.group(2)):
        seconds, tflops, mfu, tgs, loss = c.groups()
        return StepFact(rank=rank, step=int(m.group(1)), tgs=float(tgs),
                        seconds=float(seconds), tflops=float(tflops),
                        mfu=float(mfu) if mfu is not None else None, loss=float(loss))
    fields: dict[str, str] = {}
    for part in m.group(2).split(","):
        key, sep, value = part.partition(":")
        if sep:
            fields.setdefault(key.strip(), value)
    tgs = _number(fields.get("Tokens/s/device", ""))
    if tgs is None:
        return None

    def opt(key: str) -> float | None:
        return _number(fields[key]) if key in fields else None

    return StepFact(
        rank=rank,
        step=int(m.group(1)),
        tgs=tgs,
        seconds=opt("seconds"),
        tflops=opt("TFLOP/s/device"),
        mfu=opt("MFU"),
        loss=opt("loss"),
    )


def _parse_memstats(rank: int | None, body: str) -> MemstatsFact | None:
    m = _MEMSTATS.search(body) if "Using (GB)" in body else None
    if m is None:
        return None
    return MemstatsFact(rank=rank, used_gb=float(m.group(1)), limit_gb=float(m.group(2)))


def _parse_compiled_memory(rank: int | None, body: str) -> CompiledMemoryFact | None:
    m = next((m for p in _COMPILED if (m := p.search(body)) is not None), None)
    if m is None:
        return None
    total, output, temp, argument, host = (float(g) for g in m.groups())
    # The total is the device parts added up (less aliased buffers); a line whose parts
    # exceed its total by more than rounding is garbled, not a measurement.
    if max(output, temp, argument) > total + 0.1:
        return None
    return CompiledMemoryFact(rank=rank, total_gb=total, output_gb=output, temp_gb=temp,
                              argument_gb=argument, host_temp_gb=host)


def _parse_structured(full: str, body: str) -> LineFact | None:
    """Header, banner, NODE_EXIT and summary lines: the toolkit's own prints (and the
    simulated cluster's `Cluster time:` in its summary)."""
    stripped = body.strip()
    if stripped.startswith("="):
        if _SUMMARY_RULE.match(stripped):
            return BannerFact(stage="JOB SUMMARY", status="BEGIN", detail="")
        if m := _BANNER.match(stripped):
            return _banner(m, full)
    if "=" in body and (m := _HEADER.match(body)):
        return HeaderFact(key=m.group(1), value=unquote(m.group(2).strip()))
    if "NODE_EXIT" in body and (m := _NODE_EXIT.search(body)):
        return NodeExitFact(host=m.group(1), exit_code=int(m.group(2)))
    if "Status:" in body and (m := _STATUS.match(body)):
        return _summary(m)
    if "Cluster time:" in body and (m := CLUSTER_TIME.match(body)):
        return ClusterTimeFact(start=float(m.group(1)), end=float(m.group(2)))
    return None


def _summary(m: re.Match[str]) -> SummaryFact:
    inner = m.group(2) or ""
    code = _EXIT_IN_PARENS.search(inner)
    detail = m.group(3) or ("" if code else inner)
    return SummaryFact(
        status=m.group(1),
        exit_code=int(code.group(1)) if code else None,
        detail=detail.strip(),
    )


def _banner(m: re.Match[str], full: str) -> BannerFact | SignalFact:
    stage, status, detail = m.group("stage"), m.group("status"), m.group("detail") or ""
    klass = FAILING_BANNERS.get((stage, status))
    if klass is None:
        return BannerFact(stage=stage, status=status, detail=detail)
    return SignalFact(rank=None, klass=klass, text=full, detail=f"{stage} {status} ({detail})")


def unquote(value: str) -> str:
    """A shell value without its one pair of surrounding quotes."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


# A failure line kept as evidence is cut here: enough to read, not the whole of a line that
# names every field of MaxText's config (its unknown-override error) or of a hostile log.
EVIDENCE_CHARS = 600


def as_evidence(line: str) -> str:
    """A line as a failure's evidence keeps it: cut at EVIDENCE_CHARS."""
    return line if len(line) <= EVIDENCE_CHARS else line[:EVIDENCE_CHARS] + " …"


def _parse_signal(rank: int | None, full: str, body: str) -> SignalFact | None:
    """A line that holds some row's needle (`parse_line` searched for them first)."""
    found = match_signature(body)
    if found is None or is_false_positive(body):
        return None
    klass, detail = found
    sizes = oom_sizes(body) if klass is FailureClass.OOM else None
    text = as_evidence(full)
    return SignalFact(rank=rank, klass=klass, text=text, detail=detail,
                      required_gb=sizes[0] if sizes else None,
                      available_gb=sizes[1] if sizes else None)

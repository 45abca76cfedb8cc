"""sweepd's xla-tuning sweep of a one-chip job on the real TPU v5e chip (2026-12-06, issue 47
item 8): `scripts/tpu/run.sh xla` ran `sweepd run` of examples/xla-tuning/tpu.yaml (the
default TPU catalog, `max_runs: 6`) with real MaxText as the local backend's trainer. What it
recorded is in tests/fixtures/tpu_v5e/2026-12-06-xla-sweep-one-chip/: every job's raw log, the
spec, `report --json`, the run's output with `explain`, the evidence run's memory report.

What these tests hold: no family acting on collectives alone ran (one device has none: rule
`catalog.no_collectives`, on the device count and on the evidence run's HLO dump, read on the
chip), the catalog was ordered from the dump (memory first), and every job read as a pass
within the chip's noise of the baseline, so "no change to deploy" is what the truth says."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from statistics import fmean
from typing import Any

from sweepd.kinds.xla_tuning.evidence.jobfacts import MEMORY_REPORT, memory_bytes
from sweepd.monitor.reading import read_log
from tests.golden_files import GOLDEN, check_golden_cases

SWEEP = Path(__file__).parent / "fixtures" / "tpu_v5e" / "2026-12-06-xla-sweep-one-chip"
COLLECTIVE_ONLY = {"acf", "acfag", "occ", "dpar", "aag"}


def _report() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SWEEP / "report.json").read_text())
    return data


def _tgs(job: int) -> float:
    with gzip.open(SWEEP / f"job{job}.log.gz", "rt", encoding="utf-8", errors="replace") as f:
        reading = read_log(f.read().splitlines())
    assert reading.failure.verdict.klass is None, job
    return fmean(reading.steps[s].tgs for s in reading.window)


def test_no_collective_family_ran_on_one_chip_and_the_verdict_says_why() -> None:
    report = _report()
    ran = [r["values"] for r in sorted(report["runs"], key=lambda r: int(r["run"]))]
    assert ran == ["baseline", "evidence", "vmem65536", "tlhs", "tlhs0", "vmem16384"]
    assert not COLLECTIVE_ONLY & set(ran)
    caveats = {c["kind"]: c for c in report["verdict"]["caveats"]}
    skipped = caveats["no_collectives"]
    assert skipped["rule"] == "catalog.no_collectives"
    assert set(skipped["profiles"]) == COLLECTIVE_ONLY
    # Both kinds of evidence: the topology, and the dump the chip's evidence run wrote.
    check_golden_cases(GOLDEN / "xla_one_chip" / "recorded_no_collectives.txt", {
        "the caveat's evidence": skipped["evidence"]})


def test_the_evidence_runs_dump_was_read_and_ordered_the_catalog() -> None:
    text = (SWEEP / "sweepd_run.txt").read_text()
    # Wave 2 names the dump it read: all compute, so memory (the VMEM limit) came first.
    first_wave2 = next(line for line in text.splitlines() if "[wave.catalog]" in line)
    assert "vmem65536" in first_wave2
    check_golden_cases(GOLDEN / "xla_one_chip" / "recorded_wave2_order.txt", {
        "the evidence read": "\n".join(ln for ln in text.splitlines()
                                        if "evidence: compute" in ln),
        "wave 2's first run": first_wave2})


def test_the_evidence_runs_memory_report_reads_as_the_chip_wrote_it(tmp_path: Path) -> None:
    # The dump's memory report, under the name libtpu gave it beside its dump.
    dump = tmp_path / "module_0098.jit_train_step.cl_933746096.after_optimizations.txt"
    report = dump.with_name(dump.name.removesuffix(".txt") + MEMORY_REPORT)
    with gzip.open(SWEEP / "evidence-memory-usage-report.txt.gz", "rt") as f:
        report.write_text(f.read())
    assert memory_bytes(dump) == 5_638_940_672     # 5.25 GiB, the program at batch 8


def test_every_job_read_within_the_chips_noise_so_no_change_is_the_truth() -> None:
    report = _report()
    base = _tgs(1)
    gains = {job: _tgs(job) / base - 1 for job in range(2, 7)}
    # The chip's runs agree within 0.1 %: nothing near the SKILL.md's +2 % bar.
    assert all(abs(g) < 0.001 for g in gains.values()), gains
    assert report["verdict"]["outcome"] in ("no_change", "bounded")
    stored = {int(r["run"]): r["tgs"] for r in report["runs"]}
    assert abs(stored[1] - base) / base < 1e-6

"""tests/sim_log.py prints what `python -m sweepd.sim header|summary` prints, for the same
arguments (the Slurm tests' jobs use it in its place)."""

from __future__ import annotations

import subprocess

import pytest

from tests.slurm_sweep import HEADER, SIM, SUMMARY

JOB = ["--job-id", "4711", "--job-name", "JAX-llama2-70b-steps_15", "--model", "llama2-70b",
       "--nodes", "chi[2832,2863]"]


def _out(argv: list[str]) -> tuple[int, str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, done.stdout


@pytest.mark.parametrize("args", [
    ["header", *JOB, "--", "steps=15", "_env_A=b c"],
    ["summary", *JOB, "--exit", "0", "--wall", "12.4"],
    ["summary", *JOB, "--exit", "1", "--wall", "3", "--failure", "Training FAILED (exit=1)"],
    ["summary", *JOB, "--exit", "143", "--wall", "7"],
], ids=["header", "success", "failed", "cancelled"])
def test_the_stand_in_prints_what_the_simulator_prints(args: list[str]) -> None:
    ours = _out([*(HEADER if args[0] == "header" else SUMMARY), *args[1:]])
    theirs = _out([*SIM, *args])
    assert theirs[0] == 0 and theirs[1].strip(), theirs
    assert ours == theirs

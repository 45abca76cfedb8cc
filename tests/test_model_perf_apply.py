"""Model perf's `report --apply FILE`: what is written into `<model>.gpu.yml` is exactly the
verdict (both parameters of a two-parameter one; the YAML loads with those values), never a
best-so-far verdict, a read-only file or a file that is not the model's YAML config without
--force, each refused in one line with the file untouched."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweepd.kinds.model_perf.hooks import ApplyError, apply, apply_to_config
from sweepd.kinds.registry import ClientOutput
from tests.golden_files import GOLDEN, check_golden_cases, scrubbed

SAID = GOLDEN / "model_perf_apply"

MODEL = "llama2-70b"
BATCH = "per_device_batch_size"


class Said:
    def __init__(self) -> None:
        self.out: list[str] = []
        self.failed: list[str] = []

    def io(self) -> ClientOutput:
        def fail(_args: argparse.Namespace, text: str) -> int:
            self.failed.append(text)
            return 2
        return ClientOutput(fail=fail, say=lambda text, err=False: self.out.append(text),
                            print_json=lambda _data: None)


def run(path: Path, verdict: dict[str, Any], force: bool = False) -> tuple[int, Said]:
    said = Said()
    args = argparse.Namespace(id=7, apply=path, commit=False, force=force, json=False)
    report = {"verdict": verdict, "sweep": {"spec": {"model": MODEL}}}
    return apply(args, report, said.io()), said


def config(tmp_path: Path, text: str, name: str = f"{MODEL}.gpu.yml") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def loaded(path: Path) -> Any:
    return yaml.safe_load(path.read_text("utf-8"))


def test_a_two_parameter_verdict_writes_both_config_keys(tmp_path: Path) -> None:
    path = config(tmp_path, f"model_name: {MODEL}\n{BATCH}: 4\nremat_policy: minimal_flash\n")
    code, said = run(path, {"parameter": BATCH, "best": 10, "second": "remat_policy",
                            "second_best": "save_dot_except_mlp", "settled": True})
    assert code == 0, said.failed
    assert loaded(path) == {"model_name": MODEL, BATCH: 10,
                            "remat_policy": "save_dot_except_mlp"}
    check_golden_cases(SAID / "two_parameters.txt",
                       {"written": scrubbed("\n".join(said.out), tmp=tmp_path)})


def test_a_memory_fraction_verdict_says_where_the_env_var_goes(tmp_path: Path) -> None:
    text = f"model_name: {MODEL}\n{BATCH}: 4\n"
    path = config(tmp_path, text)
    verdict = {"parameter": BATCH, "best": 12, "second": "_env_XLA_PYTHON_CLIENT_MEM_FRACTION",
               "second_best": 0.85, "settled": True}
    code, said = run(path, verdict)
    assert code == 2 and path.read_text() == text
    [line] = said.failed
    assert f"configs/{MODEL}.env.sh" in line and "--force" in line and "\n" not in line
    code, forced = run(path, verdict, force=True)
    # The batch alone is written: the variable is no key of the YAML.
    assert code == 0 and path.read_text() == text.replace(f"{BATCH}: 4", f"{BATCH}: 12")
    check_golden_cases(SAID / "memory_fraction.txt", {
        "refused": scrubbed(line, tmp=tmp_path),
        "forced": scrubbed("\n".join(forced.out), tmp=tmp_path)})


def test_a_best_so_far_verdict_is_refused_unless_forced_and_then_its_caveat_said(
        tmp_path: Path) -> None:
    text = f"{BATCH}: 4\n"
    path = config(tmp_path, text)
    verdict = {"parameter": BATCH, "best": 13, "settled": False,
               "caveat": "max_runs (6) ran out before the search settled"}
    code, said = run(path, verdict)
    assert code == 2 and path.read_text() == text and len(said.failed) == 1
    code, forced = run(path, verdict, force=True)
    assert code == 0 and loaded(path) == {BATCH: 13}
    # Refused naming the verdict's caveat; forced, written and the caveat said after.
    check_golden_cases(SAID / "best_so_far.txt", {
        "refused": scrubbed(said.failed[0], tmp=tmp_path),
        "forced": scrubbed("\n".join(forced.out), tmp=tmp_path)})


@pytest.mark.parametrize("text, other", [
    # Set twice: YAML reads the later one, so every top-level line is set.
    (f"model_name: m\n{BATCH}: 4\nsteps: 20\n{BATCH}: 6\n", {"steps": 20}),
    # The value on the next line (a block value): replaced with it.
    (f"model_name: m\n{BATCH}:\n  4\nsteps: 5\n", {"steps": 5}),
    # A quoted key is the same key; a BOM and CRLF endings are kept.
    (f"\ufeff\"{BATCH}\": 4\r\nsteps: 3\r\n", {"steps": 3}),
    # A nested key of the same name is not the top-level one.
    (f"eval:\n  {BATCH}: 2\n{BATCH}: 4  # tuned\n", {"eval": {BATCH: 2}}),
])
def test_the_written_file_loads_with_exactly_the_verdicts_value(tmp_path: Path, text: str,
                                                                 other: dict[str, Any]) -> None:
    path = config(tmp_path, text)
    apply_to_config(path, BATCH, 10)
    got = loaded(path)
    assert got[BATCH] == 10 and all(got[k] == v for k, v in other.items())
    new = path.read_bytes()
    assert new.startswith(b"\xef\xbb\xbf") == text.startswith("\ufeff")
    assert (b"\r\n" in new) == ("\r\n" in text)
    assert new.count(BATCH.encode()) == text.count(BATCH)  # replaced, never appended


def test_an_edit_that_would_change_another_key_is_refused(tmp_path: Path) -> None:
    text = f"{BATCH}: &bs 4\neval_{BATCH}: *bs\n"
    path = config(tmp_path, text)
    with pytest.raises(ApplyError, match=f"would also change eval_{BATCH}") as e:
        apply_to_config(path, BATCH, 10)
    assert path.read_text() == text and "\n" not in str(e.value)


def test_a_value_that_would_not_read_back_as_itself_is_quoted(tmp_path: Path) -> None:
    path = config(tmp_path, "steps: 1\n")
    apply_to_config(path, "remat_policy", "true")
    assert loaded(path)["remat_policy"] == "true"


def test_a_file_that_is_not_the_models_yaml_mapping_is_refused(tmp_path: Path) -> None:
    env = config(tmp_path, "# env for llama2\n", f"{MODEL}.env.sh")
    code, said = run(env, {"parameter": BATCH, "best": 10})
    assert code == 2 and env.read_text() == "# env for llama2\n"
    assert f"expected configs/{MODEL}.gpu.yml" in said.failed[0] or \
        f"writes {MODEL}'s configs/{MODEL}.gpu.yml" in said.failed[0]
    listed = config(tmp_path, "- a\n- b\n")
    code, said = run(listed, {"parameter": BATCH, "best": 10})
    assert code == 2 and listed.read_text() == "- a\n- b\n"
    assert "is not a YAML mapping" in said.failed[0]


def test_a_read_only_config_is_refused_unless_forced(tmp_path: Path) -> None:
    path = config(tmp_path, f"{BATCH}: 4\n")
    path.chmod(0o444)
    code, said = run(path, {"parameter": BATCH, "best": 10})
    assert code == 2 and "read-only (mode 0444)" in said.failed[0]
    assert path.read_text() == f"{BATCH}: 4\n"
    code, said = run(path, {"parameter": BATCH, "best": 10}, force=True)
    assert code == 0 and loaded(path) == {BATCH: 10}

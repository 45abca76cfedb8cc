"""Does `report --apply` deploy what the sweep measured? (issue 21; not a test)

    python bench/xla_deploy_realizes.py [--landscapes N] [--real N] [--seed S] [--smoke]

For each bench landscape (the facts file's FSDP=8 and PP=8 cells; every random family of
bench/xla_tuning_landscapes.py's GENERATORS (`tuned`, `heldout`, `fresh`, `factsheld`); and
`envfile`: `fresh` cells whose env file also sets the all-gather threshold to 1 GiB, worth
-10 % to +2 %, so that restore_default is in the catalog and can be part of a recipe), the
wave planner runs a whole sweep (`replay`, its runs noisy, read-only use of the planner).
Its verdict's recipe then goes the way a person deploys it:

1. the cell's env file is written in one of the toolkit's shapes (the deepseek3-671b
   two-line append, the llama3.1 multi-line export, plain `export`s) with the cell's
   deployed settings;
2. `kinds.xla_tuning.hooks_apply.apply_env_patch` writes the recipe's block into it (as
   `--apply` does);
3. a real bash sources the patched file as `_train.sh` does, with a job's passthrough
   overrides: the cell's parallelism, and another parallelism.

Noise-free, the settings in effect for the cell's job must have the recipe's true gain
(`Landscape.tgs`), and a job of another parallelism must run exactly as before the patch.

`--before` writes the patch the way sweepd did before (issue 21, item 1: the catalog parts
only, restore_default dropped; guarded by `MAXTEXT_DCN_PP`, which the toolkit never sets,
PP > 1 against the rest; an empty if-block when nothing was left), for comparison.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from xla_tuning_landscapes import GENERATORS, Case

from sweepd.kinds.xla_tuning.catalog.catalog import Axis, Layer, Parallelism, Profile, Setting
from sweepd.kinds.xla_tuning.catalog.defaults import default_landscapes
from sweepd.kinds.xla_tuning.catalog.flags import AG, GIB, IMAGE_DEFAULTS, default_catalog
from sweepd.kinds.xla_tuning.catalog.landscape import Effect, Landscape
from sweepd.kinds.xla_tuning.deploy import deploy
from sweepd.kinds.xla_tuning.deploy.hooks_apply import apply_env_patch
from sweepd.kinds.xla_tuning.deploy.sourced import source
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.replay import replay
from sweepd.kinds.xla_tuning.search import profiles
from sweepd.kinds.xla_tuning.sim.tuning import parallelism_overrides

MODEL = "bench-model"
IMAGE_XLA = " ".join(f"--{k}={v}" for k, v in IMAGE_DEFAULTS.items() if k.startswith("xla_"))
SHAPES = ("deepseek", "llama", "plain")
OTHER = {"FSDP=8": "PP=8", "PP=8": "FSDP=8", "TP=8": "FSDP=8"}


@dataclass
class Tally:
    verdicts: int = 0
    deployed: int = 0  # verdicts with a recipe to deploy
    realized: int = 0  # ... whose settings in effect have the recipe's true gain
    untouched: int = 0  # ... where another parallelism's job runs as before the patch
    restore: int = 0  # ... recipes holding a restore_default part
    conditional: int = 0  # ... verdicts `--apply` writes only with --force (deployed here too)
    failures: list[str] = field(default_factory=list)


def env_file_text(deployed: Sequence[Setting], shape: str) -> str:
    xla = [s for s in deployed if s.layer is Layer.XLA]
    env = [s for s in deployed if s.layer is Layer.ENV]
    lines = ["# Per-model environment overrides (sourced by _train.sh after train_env.sh)."]
    if shape == "deepseek" and xla:
        lines += [f'XLA_FLAGS="${{XLA_FLAGS:+$XLA_FLAGS }}{s.text}"' for s in xla]
        lines.append("export XLA_FLAGS")
    elif shape == "llama" and xla:
        parts = [s.text for s in xla]
        lines.append('export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }' + " \\\n    ".join(parts)
                     + '"')
    else:
        lines += [f'export XLA_FLAGS="${{XLA_FLAGS}} {s.text}"  # tuned' for s in xla]
    lines += [f"export {s.key}={s.value}" for s in env]
    return "\n".join(lines) + "\n"


def in_effect(env: Path, par: str) -> tuple[Setting, ...]:
    """The job's settings after the env file, without its own parallelism overrides."""
    over = parallelism_overrides(par)
    got = source(env, [f"{k}={v}" for k, v in over.items()], IMAGE_XLA).settings()
    return tuple(s for s in got if not (s.layer is Layer.MAXTEXT and s.key in over))


def other_parallelism(par: str) -> str:
    return OTHER.get(par, "TP=8")


def before_patch(env: Path, par: Parallelism, parts: Sequence[deploy.Part]) -> bool:
    """The patch as sweepd wrote it before; False when the file would not parse."""
    lines = []
    for p in parts:
        if p.name == "restore_default":
            continue  # the report's table never held it: the part was lost
        for s in p.settings:
            if s.layer is Layer.XLA:
                lines.append(f'    export XLA_FLAGS="${{XLA_FLAGS}} {s.text}"')
            elif s.layer is Layer.ENV:
                lines.append(f"    export {s.key}={s.value}")
            else:
                lines.append(f"    # MaxText override (not this file): {s.label}")
    op = "-gt" if par.degree(Axis.PP) > 1 else "-le"
    block = ["# >>> sweepd: before >>>", f'if [[ "${{MAXTEXT_DCN_PP:-1}}" {op} 1 ]]; then',
             *lines, "fi", "# <<< sweepd: before <<<"]
    text = env.read_text() + "\n".join(block) + "\n"
    if subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True).returncode:
        return False  # `report --apply` exited 2: nothing deployed
    env.write_text(text)
    return True


def judge(land: Landscape, cat: tuple[Profile, ...], seed: int, work: Path, t: Tally,
          before: bool = False) -> None:
    par = Parallelism.parse(land.parallelism)
    inp = Inputs(par, cat, tags=land.tags,
                 deployed=land.deployed_settings())
    verdict = replay(inp, land, random.Random(seed)).verdict
    t.verdicts += 1
    if verdict.recipe is None:
        return
    t.deployed += 1
    t.conditional += verdict.conditional
    parts = deploy.parts(verdict.recipe, profiles(inp), {})
    t.restore += any(p.name == "restore_default" for p in parts)
    env = work / f"{seed}" / "configs" / f"{MODEL}.env.sh"
    env.parent.mkdir(parents=True)
    (env.parent / f"{MODEL}.gpu.yml").write_text("")
    env.write_text(env_file_text(land.deployed_settings(), SHAPES[seed % len(SHAPES)]))
    other = other_parallelism(land.parallelism)
    unpatched = in_effect(env, other)
    if before:
        before_patch(env, par, parts)
    else:
        apply_env_patch(env, MODEL, par, [f"# bench {seed}: {verdict.recipe}"],
                        deploy.body(parts))
    tag = land.tags[0]
    want = land.tgs([s for p in parts for s in p.settings], tag)
    got = land.tgs(in_effect(env, land.parallelism), tag)
    if abs(got / want - 1) < 1e-9:
        t.realized += 1
    else:
        t.failures.append(f"{land.parallelism} {verdict.recipe}: {got / want - 1:+.4%}")
    t.untouched += in_effect(env, other) == unpatched


def with_env_flag(case: Case, rng: random.Random) -> Case:
    """The cell with an env file that also sets ag = 1 GiB, worth -10 % .. +2 %."""
    land, cat = case
    label = f"{AG}={GIB}"
    effects = {**land.effects, label: Effect(tgs=rng.uniform(0.90, 1.02))}
    return land.model_copy(update={"deployed": (*land.deployed, label),
                                   "effects": effects}), cat


def families(n: int, real: int, seed: int) -> dict[str, list[Case]]:
    out: dict[str, list[Case]] = {"real": []}
    for land in default_landscapes():
        cat = default_catalog(Parallelism.parse(land.parallelism))
        out["real"] += [(land, cat)] * real
    for name, gen in GENERATORS.items():
        rng = random.Random(seed * 1000 + len(name))
        out[name] = [gen(rng) for _ in range(n)]
    rng = random.Random(seed * 1000 + 99)
    out["envfile"] = [with_env_flag(GENERATORS["fresh"](rng), rng) for _ in range(n)]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--landscapes", type=int, default=40, help="per random family")
    ap.add_argument("--real", type=int, default=10, help="replays of each real cell")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--smoke", action="store_true", help="a few landscapes (< 20 s)")
    ap.add_argument("--before", action="store_true",
                    help="the patch as sweepd wrote it before issue 21, for comparison")
    args = ap.parse_args(argv)
    n, real = (3, 1) if args.smoke else (args.landscapes, args.real)
    start = time.monotonic()
    print(f"{'family':<9} {'verdicts':>8} {'deployed':>8} {'realized':>9} {'other par.':>10} "
          f"{'w/ restore':>10} {'conditional':>11}")
    bad = 0
    with tempfile.TemporaryDirectory(prefix="sweepd-deploy-bench-") as tmp:
        for fam, cases in families(n, real, args.seed).items():
            t = Tally()
            for i, (land, cat) in enumerate(cases):
                judge(land, tuple(cat), args.seed * 100_000 + i, Path(tmp) / fam, t,
                      args.before)
            d = max(1, t.deployed)
            print(f"{fam:<9} {t.verdicts:>8} {t.deployed:>8} {t.realized / d:>9.0%} "
                  f"{t.untouched / d:>10.0%} {t.restore:>10} {t.conditional:>11}")
            for f in t.failures[:5]:
                print(f"  not realized: {f}")
            bad += len(t.failures) + (t.deployed - t.untouched)
    print(f"({time.monotonic() - start:.0f} s; realized = the settings in effect for the "
          "cell's job after the patch have the recipe's true gain, noise-free; other par. = "
          "a job of another parallelism runs exactly as before the patch; conditional = "
          "verdicts --apply writes only with --force, deployed here as with it)")
    return 1 if bad and not args.before else 0


if __name__ == "__main__":
    sys.exit(main())

"""The xla-tuning sweep's spec (issue 14): model, cluster slot, parallelism, the rest optional.

A spec without a model, a cluster slot (`nodes`, or `partition` + `node_count`, or
`node_count`) or a parallelism is refused naming what is missing: those are never guessed.
`inputs` turns it into the planner's `board.Inputs` (catalog, config tags, thresholds).
"""

from __future__ import annotations

import difflib
import importlib.util
from typing import TYPE_CHECKING, Any, Literal, get_args, get_type_hints

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from sweepd.kinds.spec import Scalar, _Spec, model_of_setup, refuse_empty_profiler
from sweepd.kinds.xla_tuning.catalog.catalog import (
    Axis,
    Layer,
    Mechanism,
    Parallelism,
    Profile,
    Setting,
)
from sweepd.kinds.xla_tuning.catalog.flags import default_catalog
from sweepd.kinds.xla_tuning.catalog.tpu_flags import FLAGS_VAR as TPU_FLAGS_VAR
from sweepd.kinds.xla_tuning.catalog.tpu_flags import KNOWN, tpu_catalog, unknown_names
from sweepd.kinds.xla_tuning.evidence.results import BASELINE, EVIDENCE, RESTORE
from sweepd.kinds.xla_tuning.inputs import Inputs
from sweepd.kinds.xla_tuning.thresholds import (
    PROPOSER_NEEDS,
    Proposer,
    Stop,
    XlaThresholds,
    meanings,
    spec_fields,
)
from sweepd.kinds.xla_tuning.thresholds import THRESHOLDS as T
from sweepd.util.model_shapes import UnknownModel, resolve_model

MICROBATCHES = "num_pipeline_microbatches"
# MaxText's shape overrides: with an unknown model name these are its shape.
SHAPE_KEYS = ("base_emb_dim", "base_num_decoder_layers", "base_num_query_heads",
              "base_num_kv_heads", "base_mlp_dim", "head_dim", "max_target_length")
_RESERVED = frozenset({BASELINE, EVIDENCE, RESTORE})
# A profile's layer when it names none: how the key is written says where it goes.
_DEFAULT_MECHANISM = {Layer.XLA: Mechanism.SCHEDULER, Layer.ENV: Mechanism.TRANSPORT,
                      Layer.MAXTEXT: Mechanism.PIPELINE}


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class ProfileSpec(_Part):
    """One profile the person adds: `xla_*` keys are XLA flags, UPPER_CASE keys env vars,
    anything else a MaxText override."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,40}$")
    settings: dict[str, str] = Field(min_length=1)
    mechanism: Mechanism | None = Field(default=None, strict=False,
                                        description="e.g. OVERLAP or 'cross-iteration overlap'")

    @field_validator("mechanism", mode="before")
    @classmethod
    def _by_name(cls, v: Any) -> Any:
        return Mechanism[v] if isinstance(v, str) and v in Mechanism.__members__ else v

    @field_validator("settings")
    @classmethod
    def _no_empty_profiler(cls, v: dict[str, str]) -> dict[str, str]:
        refuse_empty_profiler(v)
        return v

    def profile(self) -> Profile:
        settings = tuple(Setting(k, v, layer_of(k)) for k, v in self.settings.items())
        mech = self.mechanism or _DEFAULT_MECHANISM[settings[0].layer]
        return Profile(self.name, settings, frozenset({mech}))


class _ThresholdsBase(_Part):
    """What the generated section holds beyond its fields: the earlier spelling it reads."""

    @model_validator(mode="before")
    @classmethod
    def _earlier_spelling(cls, data: Any) -> Any:
        """`drift_trend: true | false`, the option's first spelling, is `drift: line | mean`."""
        if isinstance(data, dict) and "drift_trend" in data:
            data = dict(data)
            old = data.pop("drift_trend")
            if not isinstance(old, bool):
                raise ValueError("drift_trend must be true or false (now: drift: line | mean)")
            data.setdefault("drift", "line" if old else "mean")
        return data


def _section() -> dict[str, Any]:
    """The spec's `thresholds:` fields, from the record: its type, default and bounds each."""
    hints = get_type_hints(XlaThresholds)
    return {name: (hints[name], Field(default=getattr(T, name), description=meanings()[name],
                                      **bounds))
            for name, bounds in spec_fields().items()}


if TYPE_CHECKING:
    class Thresholds(_ThresholdsBase):
        """The stop rules' section of the spec (generated at run time from the record)."""

        def __getattr__(self, name: str) -> Any: ...
else:
    Thresholds = create_model(
        "Thresholds", __base__=_ThresholdsBase, __module__=__name__,
        __doc__="The stop rules; generated from `thresholds.XlaThresholds` (its fields marked "
                "`spec`, their defaults and bounds), never written twice.", **_section())


def _default_tags() -> dict[str, dict[str, Scalar]]:
    return {"default": {}}


def layer_of(key: str) -> Layer:
    if key.startswith("xla_"):
        return Layer.XLA
    return Layer.ENV if key.isupper() else Layer.MAXTEXT


class XlaTuningSpec(_Spec):
    """Find the XLA / NCCL flags (1-3) that make one model's step faster on frozen nodes."""

    kind: Literal["xla-tuning"]
    model: str  # required: the env file and configs are the model's
    nodes: str = Field(default="", description="hostlist, frozen for the whole sweep")
    partition: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    node_count: int | None = Field(default=None, ge=1, le=4096)
    parallelism: str = Field(description="FSDP=8, PP=8, TP=8, PP=4,FSDP=2 ...")
    per_device_batch_size: int | None = Field(
        default=None, ge=1, le=4096,
        description="default: the latest finished model-perf optimum, else the config's")
    # Set from config_tags' first key when not given: a stored spec's JSON sorts its keys, so
    # the primary is kept by name (and put first again when the spec is read back).
    primary_tag: str | None = Field(default=None, description="default: config_tags' first")
    config_tags: dict[str, dict[str, Scalar]] = Field(
        default_factory=_default_tags, min_length=1, max_length=8, validate_default=True,
        description="named override sets; the first is the primary")
    profiles: list[ProfileSpec] = Field(default_factory=list, max_length=200)
    catalog: Literal["extend", "replace"] = "extend"
    # `seed`: the SKILL.md's stop rules (a confirmed >= +5 % recipe with Wave 6 run ends the
    # sweep); `thorough`: the winner rule waits for the search to plateau (the best, not
    # good enough).
    stop: Stop = T.stop
    # Who proposes a wave's exploring runs: the hand rules (default), Optuna's TPE or a
    # Bayesian linear model (docs/xla-tuning.md: both measured below the rules).
    proposer: Proposer = T.proposer
    thresholds: Thresholds = Field(default_factory=Thresholds)
    # `tpu`: the profiles' XLA flags go in LIBTPU_INIT_ARGS (libtpu reads them there, not
    # XLA_FLAGS), the catalog is the TPU one (`tpu_flags.py`) and a flag name it does not
    # know is refused before anything runs.
    platform: Literal["gpu", "tpu"] = "gpu"
    # The most runs (jobs, failures included) the sweep may make; reached, it ends as at
    # the 8 h stop (`stop.max_runs`). None: the 8 h timebox alone bounds it.
    max_runs: int | None = Field(default=None, ge=3, le=2000)

    @model_validator(mode="before")
    @classmethod
    def _primary_first(cls, data: Any) -> Any:
        tags = data.get("config_tags") if isinstance(data, dict) else None
        if isinstance(data, dict) and data.get("primary_tag") is None:
            first = next(iter(tags), None) if isinstance(tags, dict) else "default"
            return {**data, "primary_tag": first} if isinstance(first, str) else data
        return data

    @field_validator("config_tags")
    @classmethod
    def _tags_no_empty_profiler(cls, v: dict[str, dict[str, Scalar]]
                                ) -> dict[str, dict[str, Scalar]]:
        for overrides in v.values():
            refuse_empty_profiler(overrides)
        return v

    @field_validator("config_tags")
    @classmethod
    def _primary_tag_first(cls, v: dict[str, dict[str, Scalar]], info: ValidationInfo
                           ) -> dict[str, dict[str, Scalar]]:
        primary = info.data.get("primary_tag")
        if primary is None:
            return v
        if primary not in v:
            raise ValueError(f"primary_tag {primary!r} is not one of the config tags "
                             f"({', '.join(v)})")
        return {primary: v[primary], **{k: o for k, o in v.items() if k != primary}}

    @field_validator("proposer", mode="before")
    @classmethod
    def _known_proposer(cls, v: Any) -> Any:
        """A proposer not known: one line naming the known, the closest first."""
        known = get_args(Proposer)
        if isinstance(v, str) and v not in known:
            close = difflib.get_close_matches(v, known, 1, 0.4)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ValueError(f"unknown proposer {v!r}{hint}; one of {', '.join(known)}")
        return v

    @field_validator("proposer")
    @classmethod
    def _proposer_installed(cls, v: Proposer) -> Proposer:
        """`tpe` and `surrogate` need the bench extra's packages: refused at validate, not
        at the first wave."""
        module, package = PROPOSER_NEEDS.get(v, ("", ""))
        if module and importlib.util.find_spec(module) is None:
            raise ValueError(f"proposer {v} needs {package}, not installed here "
                             f"(pip install 'sweepd[bench]'), or use proposer: rules")
        return v

    @model_validator(mode="after")
    def _slot_and_axes(self) -> XlaTuningSpec:
        if not self.nodes and self.node_count is None:
            raise ValueError("a cluster slot is needed: nodes, or partition + node_count, "
                             "or node_count")
        if self.nodes and (self.node_count is not None or self.partition is not None):
            raise ValueError("give nodes, or partition + node_count, not both")
        self.parsed_parallelism()  # DCN axes span the nodes, TP a node's GPUs
        names = [p.name for p in self.profiles]
        if len(set(names)) != len(names):
            raise ValueError("profiles: a name is given twice")
        if _RESERVED & set(names):
            raise ValueError(f"profiles: {', '.join(sorted(_RESERVED & set(names)))} is "
                             "the sweep's own")
        if self.catalog == "replace" and not self.profiles:
            raise ValueError("catalog: replace needs profiles")
        if "per_device_batch_size" in self.overrides:
            raise ValueError("per_device_batch_size: give it as its own field")
        if self.platform == "tpu":
            self._known_tpu_flags()
        return self

    def _known_tpu_flags(self) -> None:
        """libtpu stops at start on a flag it does not know (`ERROR: Unknown command line
        flag 'NAME'`): every profile's flag is checked against the TPU catalog first."""
        for p in self.profiles:
            bad = unknown_names(list(p.settings))
            if bad:
                raise ValueError(
                    f"profile {p.name}: {', '.join(bad)} is not a TPU flag this catalog "
                    f"knows (libtpu would stop at start: Unknown command line flag); "
                    f"known: {', '.join(sorted(KNOWN))}")

    @classmethod
    def known_model(cls, name: str, context: dict[str, Any]) -> str:
        """`kinds.spec.model_of_setup` (what an unknown model leaves unknown:
        `unknown_shape`)."""
        return model_of_setup(name, context)

    def unknown_shape(self) -> str | None:
        """What is unavailable for a model sweepd has no built-in shape for (None: it has
        one): said at validate (`preflight.model_shape`) and in the report."""
        try:
            resolve_model(self.model)
            return None
        except UnknownModel:
            pass
        shape = [k for k in SHAPE_KEYS if k in self.overrides]
        given = (f"the overrides give {', '.join(shape)}" if shape else
                 "the overrides give no shape key (the train command's config decides)")
        return (f"model {self.model}: no shape sweepd knows; {given}. Unavailable: a memory "
                "estimate, the model's sequence length and GPUs per node in the report, and "
                f"per-model prior flags (no configs/{self.model}.env.sh Inventory unless the "
                "toolkit checkout has one); the flag search itself needs none of them")

    @property
    def flags_var(self) -> str:
        """The variable the profiles' XLA flags go in (`JobRequest.flags_var`)."""
        return TPU_FLAGS_VAR if self.platform == "tpu" else "XLA_FLAGS"

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> _Spec:
        """As stored, with the primary tag first again (the stored JSON sorts its keys)."""
        spec = super().from_stored(data)
        if not isinstance(spec, XlaTuningSpec):
            return spec
        primary = spec.primary_tag
        if primary is None or primary not in spec.config_tags:
            return spec
        tags = spec.config_tags
        return spec.model_copy(update={"config_tags": {
            primary: tags[primary], **{k: o for k, o in tags.items() if k != primary}}})

    @property
    def count(self) -> int:
        return len(self.node_list) if self.nodes else int(self.node_count or 0)

    @property
    def ranks(self) -> int:
        """Every rank: nodes x the TP degree (TP is ICI, inside a node)."""
        return self.count * Parallelism.parse(self.parallelism).degree(Axis.TP)

    @property
    def needed_nodes(self) -> int:
        return self.count  # frozen: every node of the slot, none substituted

    def parsed_parallelism(self) -> Parallelism:
        """The DCN axes (FSDP, PP) span the nodes, TP the GPUs of a node (SKILL.md:
        `FSDP=N (DCN FSDP only)`; the real cells ran FSDP=8 and PP=8 on 8 nodes x 8 GPUs).
        TP against a node's GPUs is the cluster's to judge (`cluster_problem`)."""
        par = Parallelism.parse(self.parallelism)
        dcn = par.degree(Axis.FSDP) * par.degree(Axis.PP)
        if dcn != self.count:
            raise ValueError(f"parallelism {self.parallelism!r}: its DCN axes (FSDP x PP) "
                             f"make {dcn}, not the {self.count} nodes")
        return par

    def cluster_problem(self, gpus_per_node: int) -> str | None:
        """TP is ICI, inside one node: its degree must divide the node's GPUs, which are the
        cluster's (`cluster.gpus_per_node`), not the model's usual 8."""
        tp = Parallelism.parse(self.parallelism).degree(Axis.TP)
        if gpus_per_node % tp:
            return (f"parallelism {self.parallelism!r}: TP={tp} does not divide the "
                    f"{gpus_per_node} GPUs of a node (cluster.gpus_per_node)")
        return None

    def default_name(self) -> str:
        return f"{self.model} {self.count}N {self.parsed_parallelism().text} xla-tuning"

    def inputs(self, deployed: tuple[Setting, ...] = ()) -> Inputs:
        par = self.parsed_parallelism()
        micro = self.overrides.get(MICROBATCHES)
        own = tuple(p.profile() for p in self.profiles)
        if self.platform == "tpu":
            base = () if self.catalog == "replace" else tpu_catalog(par)
            # The env file's GPU flags are no TPU job's: nothing of them to put back.
            deployed = tuple(s for s in deployed if s.layer is not Layer.XLA or s.key in KNOWN)
        else:
            base = () if self.catalog == "replace" else default_catalog(
                par, int(micro) if isinstance(micro, int) else None)
        t = self.thresholds
        chosen = {name: getattr(t, name) for name in spec_fields()}
        return Inputs(par, tuple(p for p in base if p.name not in {q.name for q in own}) + own,
                      tuple(self.config_tags), deployed, max_runs=self.max_runs,
                      microbatches=int(micro) if isinstance(micro, int) else None,
                      stop=self.stop, proposer=self.proposer, **chosen)

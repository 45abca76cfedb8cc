#!/bin/bash
# Driver for real MaxText runs on the one-chip TPU v5e machine.
# Usage: bash .tpu/run.sh PHASE   (PHASE = truth | sweepd | sweep | extra)
#   truth:  every batch in $BATCHES once, one process each (the every-value-once ground truth)
#   sweepd: `sweepd run` of a model perf sweep on the local backend, real MaxText as its
#           trainer ($NOISE_FLOOR: the spec's noise_floor; default the spec's own default;
#           $MODEL_NAME: the spec's model, default maxtext-0.27b; $VALUES: its values)
#   xla:    `sweepd run` of examples/xla-tuning/tpu.yaml (batch $XLA_BATCH, default 8) on the
#           local backend, then $XLA_REPEATS ("tag:flags ...") as plain runs: the truth beside it.
#           The config says one device per node, and the evidence run's HLO dump lands in the
#           state dir (outputs/sweep-1/xla_dump-evidence/, in sweepd_state.tgz): both say the
#           program has no collectives (catalog.no_collectives, in sweepd_run.txt).
# Built by scripts/tpu/prepare.sh, run from the repository root on the TPU machine.
# Writes at most 8 files to $OUT.
PHASE=${1:-sweep}
T0=$(date +%s)
DEADLINE=${DEADLINE:-565}          # seconds after start: launch nothing that cannot end before this
ROOT=$(pwd)
TPU=$ROOT/.tpu
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
exec 3>>$OUT/driver.log
log() { echo "[$(( $(date +%s) - T0 ))s] $*" >&3; echo "[$(( $(date +%s) - T0 ))s] $*"; }

# ---------- install (skipped when a warm machine still has it) ----------
if [ ! -f /tmp/site/.ok ]; then
  log "installing into /tmp/site"
  PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-deps --no-compile --no-cache-dir \
     --only-binary=:all: --index-url file:///opt/pypi/simple --find-links $TPU/whl \
     --target /tmp/site -r $ROOT/scripts/tpu/maxtext_reqs.txt > $OUT/install.log 2>&1
  rc=$?
  log "pip (all at once) rc=$rc"
  if [ $rc -ne 0 ]; then
    # one at a time, falling back to any version the index has
    while read -r req; do
      [ -z "$req" ] && continue
      PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-deps --no-compile --no-cache-dir \
        --only-binary=:all: --index-url file:///opt/pypi/simple --find-links $TPU/whl --target /tmp/site "$req" >> $OUT/install.log 2>&1 \
      || { n=${req%%==*}; echo "RETRY unpinned $n" >> $OUT/install.log; PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-deps --no-compile --no-cache-dir \
        --only-binary=:all: --index-url file:///opt/pypi/simple --find-links $TPU/whl --target /tmp/site "$n" >> $OUT/install.log 2>&1 || echo "FAILED $req" >> $OUT/install.log; }
    done < $ROOT/scripts/tpu/maxtext_reqs.txt
  fi
  touch /tmp/site/.ok
  log "install done"
fi
export PYTHONPATH=/tmp/site:$TPU/mt/src:$PYTHONPATH
export DECOUPLE_GCLOUD=TRUE PYTHONUNBUFFERED=1
if [ ! -f /tmp/env_done ]; then
  { echo "== uname"; uname -a; echo "== python"; python3 --version; python3 -c 'import platform; print(platform.libc_ver())';
    echo "== PYTHONPATH=$PYTHONPATH"; echo "== env TPU_/LIBTPU/XLA"; env | grep -E '^(TPU_|LIBTPU|XLA_|JAX_)' ;
    echo "== versions"; python3 -c '
import importlib.metadata as md
for n in ["jax","jaxlib","libtpu","numpy","flax","optax","orbax-checkpoint","grain","tokamax","transformers","pydantic","pathwaysutils","qwix","aqtp","tensorstore","protobuf","omegaconf"]:
    try: print(n, md.version(n))
    except Exception as e: print(n, "MISSING", e)
';
    echo "== import check"; JAX_PLATFORMS=cpu python3 -c 'import maxtext.trainers.pre_train.train as t; print("import ok", t.__file__)' 2>&1 | tail -5;
  } > $OUT/env.txt 2>&1
  touch /tmp/env_done
  log "env written"
fi

cd $TPU/mt
MODEL=${MODEL:-"base_emb_dim=1024 base_num_query_heads=8 base_num_kv_heads=8 base_mlp_dim=4096 base_num_decoder_layers=12 head_dim=128 max_target_length=2048"}
COMMON="dataset_type=synthetic steps=${STEPS:-15} enable_checkpointing=False enable_goodput_recording=False monitor_goodput=False enable_checkpoint_cloud_logger=False skip_jax_distributed_system=True base_output_directory=/tmp/mtout"
EXTRA_ARGS=""

# run TAG BATCH FLAGS   -> appends to runs_all.log, summary lines to driver.log
run() {
  local tag=$1 b=$2 flags=$3
  local now=$(( $(date +%s) - T0 ))
  local left=$(( DEADLINE - now ))
  if [ $left -lt ${MINLEFT:-45} ]; then log "SKIP $tag b=$b (only ${left}s left)"; return 99; fi
  local to=$(( left < 240 ? left : 240 ))
  local lf=/tmp/runlogs/$tag.log; mkdir -p /tmp/runlogs
  local cache=/tmp/jc_${4:-base}
  local cmd="LIBTPU_INIT_ARGS='$flags' python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml run_name=$tag $MODEL per_device_batch_size=$b $COMMON jax_cache_dir=$cache $EXTRA_ARGS"
  local s=$(date +%s.%N)
  local rc attempt
  for attempt in 1 2; do
    ( export LIBTPU_INIT_ARGS="$flags"; timeout -k 5 $to python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml run_name=$tag $MODEL per_device_batch_size=$b $COMMON jax_cache_dir=$cache $EXTRA_ARGS ) > $lf 2>&1
    rc=$?
    if [ $rc -ne 0 ] && grep -q -E "lockfile|TPU initialization failed|Device or resource busy" $lf && [ $attempt = 1 ]; then
      log "chip busy/refused for $tag; retry in 5s"; cp $lf $lf.busy; sleep 5; continue
    fi
    break
  done
  local e=$(python3 -c "import time;print('%.1f'%(time.time()-$s))")
  local oom=no; grep -q -E "RESOURCE_EXHAUSTED|[Oo]ut of memory|Ran out of memory" $lf && oom=yes
  local nsteps=$(grep -c "completed step" $lf)
  { echo "########## RUN tag=$tag batch=$b flags='$flags' rc=$rc wall_s=$e oom=$oom steps_logged=$nsteps"; echo "########## CMD: cd .tpu/mt && $cmd"; cat $lf; echo "########## END tag=$tag"; } >> $OUT/runs_all.log
  log "RUN tag=$tag b=$b flags='$flags' rc=$rc wall=${e}s oom=$oom steps=$nsteps | $(grep -E 'Total estimated memory' $lf | sed 's/.*\] //' | head -1) | $(grep 'completed step' $lf | tail -1 | sed 's/.*\] //')"
  if [ $rc -eq 0 ] && [ ! -f $OUT/first_success_full.log ]; then cp $lf $OUT/first_success_full.log; fi
  if [ $oom = yes ] && [ ! -f $OUT/first_oom_full.log ]; then cp $lf $OUT/first_oom_full.log; fi
  if [ $rc -ne 0 ] && [ $oom = no ]; then tail -30 $lf >&3; fi
  [ $oom = yes ] && return 2
  return $rc
}

if [ "$PHASE" = sweep ]; then
  run b1 1 ""
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 2 ] && [ $rc -ne 99 ]; then
    log "b=1 failed (not OOM): retrying with attention=dot_product"
    EXTRA_ARGS="attention=dot_product"
    run b1_dot 1 "" dot
  fi
  MINOOM=100000
  for b in ${BATCHES:-8 64 2 4 12 16 24 32 40 48 56}; do
    if [ $b -gt $MINOOM ]; then log "SKIP b=$b (> OOM batch $MINOOM)"; continue; fi
    run b$b $b ""; rc=$?
    [ $rc -eq 2 ] && [ $b -lt $MINOOM ] && MINOOM=$b
    [ $rc -eq 99 ] && break
  done
elif [ "$PHASE" = truth ]; then
  for b in ${BATCHES}; do run b$b $b ""; rc=$?; [ $rc -eq 99 ] && break; done
  for b in ${REPEATS}; do run r$b $b ""; rc=$?; [ $rc -eq 99 ] && break; done
elif [ "$PHASE" = sweepd ] || [ "$PHASE" = xla ]; then
  # sweepd's own needs beyond MaxText's (the same versions where both need one)
  PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-deps --no-compile --no-cache-dir \
     --only-binary=:all: --index-url file:///opt/pypi/simple --find-links $TPU/whl \
     --target /tmp/site -r $ROOT/scripts/tpu/sweepd_reqs.txt >> $OUT/install.log 2>&1 || log "sweepd deps FAILED"
  export PYTHONPATH=$PYTHONPATH:$ROOT
  W=/tmp/sweepd-chip; rm -rf $W; mkdir -p $W
  cat > $W/sweepd.toml <<TOML
[daemon]
state_dir = "$W/state"
socket = "$W/sweepd.sock"
[cluster]
backend = "local"
gpus_per_node = 1
gpu_memory_gib = 15.75
[cluster.local]
train_command = "python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml"
workdir = "$TPU/mt"
[policy]
poll_interval_s = 2
TOML
  # MaxText's settings for a short run on one chip, as spec overrides
  RUNARGS="dataset_type: synthetic, steps: ${STEPS:-15}, enable_checkpointing: 'False', enable_goodput_recording: 'False', monitor_goodput: 'False', enable_checkpoint_cloud_logger: 'False', skip_jax_distributed_system: 'True', base_output_directory: /tmp/mtout, jax_cache_dir: /tmp/jc_sweepd, run_name: sweepd"
  if [ "$PHASE" = xla ]; then
    # the shipped example, its batch and MaxText's run settings added to its overrides
    sed "s/^per_device_batch_size: .*/per_device_batch_size: ${XLA_BATCH:-8}/; s|^\(overrides: {\)|\1$RUNARGS, |" \
      $ROOT/examples/xla-tuning/tpu.yaml > $W/spec.yaml
  else
  { echo "kind: model-perf"; echo "model: ${MODEL_NAME:-maxtext-0.27b}"
    echo "values: [${VALUES:-4, 8, 12, 16, 24, 32, 48, 80}]"
    [ -n "${NOISE_FLOOR:-}" ] && echo "noise_floor: $NOISE_FLOOR"
    echo "overrides: {$(echo $MODEL | sed 's/=/: /g; s/ \([a-z_]*:\)/, \1/g'), $RUNARGS}"
  } > $W/spec.yaml
  fi
  cp $W/spec.yaml $OUT/spec.yaml
  log "sweepd run starts"
  timeout -k 5 $(( DEADLINE - ($(date +%s) - T0) )) python3 -m sweepd.cli.main run --config $W/sweepd.toml --state-dir $W/state $W/spec.yaml > $OUT/sweepd_run.txt 2>&1
  log "sweepd run rc=$?"
  python3 -m sweepd.cli.main report 1 --json --state-dir $W/state > $OUT/report.json 2>>$OUT/sweepd_run.txt
  python3 -m sweepd.cli.main explain 1 --state-dir $W/state >> $OUT/sweepd_run.txt 2>&1
  if [ "$PHASE" = xla ]; then
    # what the evidence run left: its HLO dump (read by sweepd) and MaxText's trace (found)
    { echo "evidence dump:"; find $W/state/outputs -name '*jit_train_step*after_optimizations.txt' -printf '%s %p\n';
      echo "profiler trace:"; find /tmp/mtout/sweepd -name '*.xplane.pb' -printf '%s %p\n' 2>/dev/null; } >&3
  fi
  tar -czf $OUT/sweepd_state.tgz -C $W state
  if [ "$PHASE" = xla ]; then
    # the truth beside the sweep: each "tag:flags" (flags comma-separated) once more
    for spec in ${XLA_REPEATS:-}; do
      IFS=: read -r tag fs <<< "$spec"
      run $tag ${XLA_BATCH:-8} "$(echo "$fs" | tr ',' ' ')" $tag
      [ $? -eq 99 ] && break
    done
  fi
elif [ "$PHASE" = extra ]; then
  # repeats of the base setting, then flag settings (own compile cache each)
  for spec in $SPECS; do
    # spec = tag:batch:flagset
    IFS=: read -r tag b fs <<< "$spec"
    case $fs in
      base) flags="";;
      vmem) flags="--xla_tpu_scoped_vmem_limit_kib=98304";;
      nolhs) flags="--xla_tpu_enable_latency_hiding_scheduler=false";;
      *) flags="$fs";;
    esac
    run $tag $b "$flags" $fs
    [ $? -eq 99 ] && break
  done
fi
log "driver finished"

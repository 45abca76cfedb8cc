# ---- TUNE_PROFILE ----
TUNE_PROFILE="${TUNE_PROFILE:-${EXTRACTED_ENV_MAP[TUNE_PROFILE]:-baseline}}"
TUNE_FLAGS=""
case "${TUNE_PROFILE}" in
    baseline) ;;  # no-op; inherits configs/<MODEL_TAG>.env.sh as-is
    ag512M)
        TUNE_FLAGS+=" --xla_gpu_all_gather_combine_threshold_bytes=536870912"
        ;;
    nch8) ;;
    *)
        echo "[train_env.sh] WARNING: unknown TUNE_PROFILE='$TUNE_PROFILE'" >&2
        ;;
esac
if [[ -n "$TUNE_FLAGS" ]]; then
    XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }${TUNE_FLAGS# }"
    export XLA_FLAGS
fi
# ---- end TUNE_PROFILE (written by sweepd) ----
# ---- TUNE_PROFILE: post-NCCL overrides ----
case "${TUNE_PROFILE:-}" in
    nch8)
        export NCCL_NCHANNELS_PER_NET_PEER=8
        ;;
esac
# ---- end TUNE_PROFILE: post-NCCL overrides (written by sweepd) ----

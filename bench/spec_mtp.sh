#!/usr/bin/env bash
# Speculative decoding from the model's own multi-token prediction layers
# (--spec-type draft-mtp) beside llama-server's, on one model with such
# layers (synth glm4moe): one setup at a time — no drafts, synthetic
# acceptance at mean length 3 (drafts of 4), and the block's real drafts
# (random weights: none land; ours gated, llama-server's not) — each server
# started with it, decode at 1 and 4 streams, rounds alternating which
# server goes first. Prints per-round aggregate tokens/s and the median of
# the paired ours/llama-server ratios. Both servers stay loaded; only one
# works at a time.
#
#   bench/spec_mtp.sh SUPERFLUID_BIN LLAMA_SERVER_BIN MODEL.gguf [ROUNDS]
#
# LLAMA_SERVER_BIN "self" pairs each setup with ours without speculation
# instead (the "llama-server" column is then that baseline).
#
# Environment: THREADS (1), SETUPS ("none synth3 mtp").
set -u
OURS=$1 LLAMA=$2 MODEL=$3 ROUNDS=${4:-2}
THREADS=${THREADS:-1} SETUPS=${SETUPS:-"none synth3 mtp"}
PO=18753 PL=18754 LOGS=${LOGS:-/tmp/bench-spec-mtp}
mkdir -p "$LOGS"
wait_up() { for _ in $(seq 180); do curl -sf "localhost:$1/health" > /dev/null && return 0; sleep 1; done; echo "server on $1 did not start"; return 1; }
stop() { [ -f "$LOGS/$1.pid" ] && kill "$(cat "$LOGS/$1.pid")" 2> /dev/null; sleep 1; }
trap 'stop $PO; stop $PL' EXIT
for setup in $SETUPS; do
  spec=() 
  case $setup in
    none) spec=() ;;
    synth3) spec=(--spec-type draft-mtp --spec-draft-n-max 4 --spec-synth-len 3) ;;
    mtp) spec=(--spec-type draft-mtp --spec-draft-n-max 4) ;;
  esac
  "$OURS" serve -m "$MODEL" --port $PO --lanes 4 --ctx 16384 --threads "$THREADS" "${spec[@]}" > "$LOGS/ours-$setup.log" 2>&1 &
  echo $! > "$LOGS/$PO.pid"
  if [ "$LLAMA" = self ]; then
    # The baseline is ours without speculation: the setup's gain.
    "$OURS" serve -m "$MODEL" --port $PL --lanes 4 --ctx 16384 --threads "$THREADS" > "$LOGS/self-$setup.log" 2>&1 &
  else
    "$LLAMA" -m "$MODEL" --port $PL -np 4 -c 16384 -t "$THREADS" -tb "$THREADS" "${spec[@]}" > "$LOGS/llama-$setup.log" 2>&1 &
  fi
  echo $! > "$LOGS/$PL.pid"
  wait_up $PO && wait_up $PL || exit 1
  python3 "$(dirname "$0")/spec_rounds.py" $PO $PL "$ROUNDS" "$setup"
  stop $PO; stop $PL
done

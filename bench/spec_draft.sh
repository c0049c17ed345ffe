#!/usr/bin/env bash
# Speculative decoding from a draft model beside llama-server (issue 23):
# the same target and draft, one setup at a time — no drafts, synthetic
# acceptance at mean lengths 3 and 5 (drafts of 4 and 6), and the real
# random-weight draft (ours gated; llama-server has no gate) — each server
# started with it, decode at 1 and 4 streams, rounds alternating which
# server goes first. Prints per-round aggregate tokens/s and the median
# of the paired ours/llama-server ratios. Both servers stay loaded; only
# one works at a time.
#
#   bench/spec_draft.sh SUPERFLUID_BIN LLAMA_SERVER_BIN TARGET.gguf DRAFT.gguf [ROUNDS]
#
# Environment: THREADS (1), SETUPS ("none synth3 synth5 draft").
set -u
OURS=$1 LLAMA=$2 MODEL=$3 DRAFT=$4 ROUNDS=${5:-2}
THREADS=${THREADS:-1} SETUPS=${SETUPS:-"none synth3 synth5 draft"}
PO=18751 PL=18752 LOGS=${LOGS:-/tmp/bench-spec-draft}
mkdir -p "$LOGS"
wait_up() { for _ in $(seq 180); do curl -sf "localhost:$1/health" > /dev/null && return 0; sleep 1; done; echo "server on $1 did not start"; return 1; }
stop() { [ -f "$LOGS/$1.pid" ] && kill "$(cat "$LOGS/$1.pid")" 2> /dev/null; sleep 1; }
trap 'stop $PO; stop $PL' EXIT
for setup in $SETUPS; do
  spec=() 
  case $setup in
    none) spec=() ;;
    synth3) spec=(--spec-type draft-simple --spec-draft-model "$DRAFT" --spec-draft-n-max 4 --spec-synth-len 3) ;;
    synth5) spec=(--spec-type draft-simple --spec-draft-model "$DRAFT" --spec-draft-n-max 6 --spec-synth-len 5) ;;
    draft) spec=(--spec-type draft-simple --spec-draft-model "$DRAFT" --spec-draft-n-max 4) ;;
  esac
  "$OURS" serve -m "$MODEL" --port $PO --lanes 4 --ctx 16384 --threads "$THREADS" "${spec[@]}" > "$LOGS/ours-$setup.log" 2>&1 &
  echo $! > "$LOGS/$PO.pid"
  "$LLAMA" -m "$MODEL" --port $PL -np 4 -c 16384 -t "$THREADS" -tb "$THREADS" "${spec[@]}" > "$LOGS/llama-$setup.log" 2>&1 &
  echo $! > "$LOGS/$PL.pid"
  wait_up $PO && wait_up $PL || exit 1
  python3 "$(dirname "$0")/spec_rounds.py" $PO $PL "$ROUNDS" "$setup"
  stop $PO; stop $PL
done

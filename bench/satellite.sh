#!/usr/bin/env bash
# The FIM-satellite benchmark (issue 15): FIM latency on the `small` model,
# idle and while four 2,000-token background prompts prefill on the `0.5b`
# model, in two setups on the same cores:
#   one  one `superfluid serve --model 0.5b --fim-model small`: the arbiter
#        gives the two engines one step at a time, FIM first;
#   two  `serve --model small` and `serve --model 0.5b` as two processes
#        (the setup users have today), each stepping when it likes.
# Then a table: FIM latency p50/p95 idle and loaded, loaded/idle, per setup.
#
# It builds nothing: `make bench-satellite` builds bin/superfluid and the
# synthetic models first. Run it on a quiet machine (≈ 3 minutes; another
# process busy on the cores slows 2-thread steps many times over).
#
#   bench/satellite.sh [one|two|both]          (default both)
#
# Environment, with defaults: SF=bin/superfluid, BIG and SAT (the models:
# .cache/models/synth-0.5b-q8_0.gguf and synth-small-f16.gguf), THREADS=2,
# CONCURRENCY=4, PROMPT_TOKENS=2000, REQUESTS=40 (FIM requests per phase),
# MAX_TOKENS=32, DURATION=60s (each FIM phase starts no request after it),
# PORT=18470 (two: PORT and PORT+1), OUT=.cache/bench-satellite (reports,
# server logs, the table).
set -euo pipefail

mode=${1:-both}
case $mode in one | two | both) ;; *)
	echo "usage: $0 [one|two|both]" >&2
	exit 2
	;;
esac

SF=${SF:-bin/superfluid}
MODELS=${MODELS:-.cache/models}
BIG=${BIG:-$MODELS/synth-0.5b-q8_0.gguf}
SAT=${SAT:-$MODELS/synth-small-f16.gguf}
THREADS=${THREADS:-2}
CONCURRENCY=${CONCURRENCY:-4}
PROMPT_TOKENS=${PROMPT_TOKENS:-2000}
REQUESTS=${REQUESTS:-40}
MAX_TOKENS=${MAX_TOKENS:-32}
DURATION=${DURATION:-60s}
PORT=${PORT:-18470}
OUT=${OUT:-.cache/bench-satellite}

for f in "$SF" "$BIG" "$SAT"; do
	[[ -e $f ]] || {
		echo "$0: $f is missing: run make bench-satellite (or make build models)" >&2
		exit 1
	}
done
command -v curl >/dev/null || { echo "$0: needs curl" >&2; exit 1; }
command -v jq >/dev/null || { echo "$0: needs jq" >&2; exit 1; }
mkdir -p "$OUT"

# The servers this script started, and the bench run while one runs: all
# are stopped on exit, however it ends (bench, stopped, writes what it
# measured; a server drains and exits).
pids=()
bench_pid=
stop_servers() {
	local p
	for p in $bench_pid "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in $bench_pid "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	pids=() bench_pid=
}
trap stop_servers EXIT
trap 'exit 130' INT TERM

# serve LOG ARGS…: starts a server in the background, logging to LOG.
serve() {
	local log=$1
	shift
	local cmd=("$SF" serve --threads "$THREADS" --park-dir off --data-dir off "$@")
	echo "+ ${cmd[*]}" | tee "$log" >&2
	"${cmd[@]}" >>"$log" 2>&1 &
	pids+=($!)
}

# wait_ready PORT LOG: until /health answers 200 (503 while loading), at
# most five minutes; a server that exits stops the run with its log's tail.
wait_ready() {
	local port=$1 log=$2 pid=${pids[-1]} i
	for ((i = 0; i < 600; i++)); do
		if curl -sf -o /dev/null "http://127.0.0.1:$port/health"; then
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "$0: the server on port $port exited; its log ($log) ends:" >&2
			tail -n 20 "$log" >&2
			exit 1
		fi
		sleep 0.5
	done
	echo "$0: the server on port $port is not ready after 5 minutes ($log)" >&2
	exit 1
}

# bench REPORT ARGS…: the fim-under-load run; a run with failed requests
# still writes its report (the table shows the failures).
bench() {
	local report=$1
	shift
	local cmd=("$SF" bench --scenario fim-under-load --concurrency "$CONCURRENCY" --prompt-tokens "$PROMPT_TOKENS"
		--requests "$REQUESTS" --max-tokens "$MAX_TOKENS" --duration "$DURATION" "$@" -o "$report")
	echo "+ ${cmd[*]}" >&2
	# In the background so that a signal reaches the trap at once (bash
	# runs traps only between foreground commands).
	"${cmd[@]}" >/dev/null &
	bench_pid=$!
	local status=0
	wait "$bench_pid" || status=$?
	bench_pid=
	if ((status != 0)); then
		echo "$0: bench exited with status $status" >&2
	fi
}

big_name=$(basename "$BIG" .gguf)

if [[ $mode != two ]]; then
	echo "== one process: $big_name with $(basename "$SAT" .gguf) as its FIM model" >&2
	load_one=$(cut -d' ' -f1-3 /proc/loadavg)
	rm -f "$OUT/report-one.json"
	serve "$OUT/serve-one.log" --model "$BIG" --fim-model "$SAT" --port "$PORT"
	wait_ready "$PORT" "$OUT/serve-one.log"
	# FIM requests go to the satellite whatever model they name; the load
	# names the large model.
	bench "$OUT/report-one.json" --url "http://127.0.0.1:$PORT" --model "$big_name"
	curl -sf "http://127.0.0.1:$PORT/metrics" >"$OUT/metrics-one.txt" || true
	stop_servers
fi

if [[ $mode != one ]]; then
	echo "== two processes: $(basename "$SAT" .gguf) and $big_name" >&2
	load_two=$(cut -d' ' -f1-3 /proc/loadavg)
	rm -f "$OUT/report-two.json"
	serve "$OUT/serve-two-fim.log" --model "$SAT" --port "$PORT"
	wait_ready "$PORT" "$OUT/serve-two-fim.log"
	serve "$OUT/serve-two-big.log" --model "$BIG" --port $((PORT + 1))
	wait_ready $((PORT + 1)) "$OUT/serve-two-big.log"
	bench "$OUT/report-two.json" --url "http://127.0.0.1:$PORT" --background-url "http://127.0.0.1:$((PORT + 1))"
	curl -sf "http://127.0.0.1:$((PORT + 1))/metrics" >"$OUT/metrics-two-big.txt" || true
	stop_servers
fi

# The table: a row for each setup this run measured.
row() { printf '%-15s %7s %9s %9s %11s %11s %8s %6s %7s\n' "$@"; }
{
	row setup "n i/l" "idle p50" "idle p95" "loaded p50" "loaded p95" "p95 l/i" failed "bg done"
	for setup in one two; do
		r=$OUT/report-$setup.json
		[[ $mode == both || $mode == "$setup" ]] && [[ -s $r ]] || continue
		IFS=$'\t' read -r -a cells < <(jq -r --arg s "$setup" '
			def v(x): if x == null then "-" else (x | tostring) end;
			.fim as $f |
			[ (if $s == "one" then "one process" else "two processes" end) + (if .interrupted then "*" else "" end),
			  "\(v($f.idle.latency_ms.n))/\(v($f.loaded.latency_ms.n))",
			  v($f.idle.latency_ms.p50), v($f.idle.latency_ms.p95),
			  v($f.loaded.latency_ms.p50), v($f.loaded.latency_ms.p95),
			  v($f.latency_ratio_p95), v(.failures.count // 0),
			  "\($f.background.requests.ok)/\($f.background_workers)" ] | @tsv' "$r")
		row "${cells[@]}"
	done
	echo "FIM latency in ms over n requests idle/loaded ($MAX_TOKENS tokens each); loaded: beside $CONCURRENCY background prompts of $PROMPT_TOKENS tokens"
	echo "on $(basename "$BIG" .gguf), FIM on $(basename "$SAT" .gguf), --threads $THREADS. bg done: background requests that finished (prefill"
	echo "and 256 tokens) while FIM was measured / running. *: interrupted. Load average as each setup started: one ${load_one:--},"
	echo "two ${load_two:--}. Reports and server logs: $OUT/"
	if [[ $mode != two && -s $OUT/metrics-one.txt ]]; then
		# Where the one process's tokens went: FIM to the satellite.
		echo "one process, decode tokens by model:" $(sed -n 's/^superfluid_model_decode_tokens_total{model="\([^"]*\)"} \(.*\)/\1 \2/p' "$OUT/metrics-one.txt")
	fi
} | tee "$OUT/table.txt"

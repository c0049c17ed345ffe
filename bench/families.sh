#!/usr/bin/env bash
# The model-family benchmark (issue 22): what an edited conversation costs on
# each family of the day — dense (qwen3), mixture-of-experts (qwen3moe),
# sliding-window (gemma4), hybrid (qwen35), hybrid MoE (qwen35moe) — on
# superfluid and, when LLAMA_SERVER names one, on llama-server built from
# the same llama.cpp tree, one server at a time on the same cores.
# `bench --scenario diverge` sends each conversation's long opening cold,
# the same conversation edited after 85% of it, then its second turn; the
# table gives each one's cached share of the prompt and time to first token.
#
# It builds nothing: `make bench-families` builds bin/superfluid first and
# passes LLAMA_SERVER through. Run it on a quiet machine.
#
#   bench/families.sh [ARCH…]          (default: every family above)
#
# Environment, with defaults: SF=bin/superfluid, LLAMA_SERVER (none: ours
# alone), SHAPE=small, TYPE=f16, THREADS=2, LANES=4, CTX=8192,
# PROMPT_TOKENS=2000, REQUESTS=2 (conversations), MAX_TOKENS=16,
# PORT=18480, OUT=.cache/bench-families (models, reports, logs, the table).
set -euo pipefail

SF=${SF:-bin/superfluid}
LLAMA_SERVER=${LLAMA_SERVER:-}
SHAPE=${SHAPE:-small}
TYPE=${TYPE:-f16}
THREADS=${THREADS:-2}
LANES=${LANES:-4}
CTX=${CTX:-8192}
PROMPT_TOKENS=${PROMPT_TOKENS:-2000}
REQUESTS=${REQUESTS:-2}
MAX_TOKENS=${MAX_TOKENS:-16}
PORT=${PORT:-18480}
OUT=${OUT:-.cache/bench-families}
archs=("$@")
((${#archs[@]})) || archs=(qwen3 qwen3moe gemma4 qwen35 qwen35moe)

[[ -x $SF ]] || { echo "$0: $SF is missing: run make bench-families (or make build)" >&2; exit 1; }
[[ -z $LLAMA_SERVER || -x $LLAMA_SERVER ]] || { echo "$0: LLAMA_SERVER=$LLAMA_SERVER is not an executable" >&2; exit 1; }
command -v curl >/dev/null || { echo "$0: needs curl" >&2; exit 1; }
command -v jq >/dev/null || { echo "$0: needs jq" >&2; exit 1; }
mkdir -p "$OUT"

pid=
stop_server() {
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# start LOG CMD…: one server in the background, ready once /health is 200.
start() {
	local log=$1 i
	shift
	echo "+ $*" | tee "$log" >&2
	"$@" >>"$log" 2>&1 &
	pid=$!
	for ((i = 0; i < 600; i++)); do
		curl -sf -o /dev/null "http://127.0.0.1:$PORT/health" && return 0
		kill -0 "$pid" 2>/dev/null || { echo "$0: the server exited; $log ends:" >&2; tail -n 20 "$log" >&2; exit 1; }
		sleep 0.5
	done
	echo "$0: no server ready after 5 minutes ($log)" >&2
	exit 1
}

# measure NAME ARCH: the diverge run against the server on PORT.
measure() {
	local name=$1 arch=$2
	local cmd=("$SF" bench --url "http://127.0.0.1:$PORT" --scenario diverge --prompt-tokens "$PROMPT_TOKENS"
		--requests "$REQUESTS" --max-tokens "$MAX_TOKENS" -o "$OUT/report-$name-$arch.json")
	echo "+ ${cmd[*]}" >&2
	"${cmd[@]}" >/dev/null || echo "$0: bench against $name on $arch exited with $?" >&2
}

for arch in "${archs[@]}"; do
	model=$OUT/synth-$arch-$SHAPE-$TYPE.gguf
	[[ -s $model ]] || "$SF" model synth --arch "$arch" --shape "$SHAPE" --type "$TYPE" -o "$model" >&2
	start "$OUT/serve-ours-$arch.log" "$SF" serve --model "$model" --port "$PORT" --threads "$THREADS" --lanes "$LANES" --ctx "$CTX" --park-dir off --data-dir off
	measure ours "$arch"
	stop_server
	if [[ -n $LLAMA_SERVER ]]; then
		start "$OUT/serve-llama-$arch.log" "$LLAMA_SERVER" -m "$model" --port "$PORT" -t "$THREADS" -np "$LANES" --kv-unified -c "$CTX" --jinja
		measure llama "$arch"
		stop_server
	fi
done

row() { printf '%-10s %-12s %8s %10s %10s %10s %10s %10s\n' "$@"; }
{
	row family server "cold ms" "edit share" "edit ms" "edit/cold" "2nd share" "2nd ms"
	for arch in "${archs[@]}"; do
		for name in ours llama; do
			r=$OUT/report-$name-$arch.json
			[[ -s $r ]] || continue
			IFS=$'\t' read -r -a cells < <(jq -r '
				def v(x): if x == null then "-" else (x * 1000 | round / 1000 | tostring) end;
				.diverge as $d |
				[ v($d.cold.ttft_ms.p50), v($d.diverged.cached_prompt_share), v($d.diverged.ttft_ms.p50),
				  v($d.diverged_over_cold_ttft), v($d.second_turn.cached_prompt_share), v($d.second_turn.ttft_ms.p50) ] | @tsv' "$r")
			row "$arch" "$([[ $name == ours ]] && echo superfluid || echo llama-server)" "${cells[@]}"
		done
	done
	echo "p50 time to first token in ms over $REQUESTS conversations; shares of the prompt found cached. synth $SHAPE $TYPE,"
	echo "$PROMPT_TOKENS-token openings edited after 85%, --threads $THREADS, $LANES lanes (-np $LANES --kv-unified), context $CTX."
	echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg). Reports and logs: $OUT/"
} | tee "$OUT/table.txt"

#!/usr/bin/env bash
# The model-family benchmark (issue 22): what an edited conversation costs on
# each family of the day — dense (qwen3), mixture-of-experts (qwen3moe),
# sliding-window (gemma4), hybrid (qwen35), hybrid MoE (qwen35moe) — on
# superfluid and, when LLAMA_SERVER names one, on llama-server built from
# the same llama.cpp tree, both up at once and working in turn on the same cores.
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
# SF_ARGS (more serve flags), TABLE_ONLY=1 (print the table of the last run), PORT=18480 (llama-server on PORT+1), OUT=.cache/bench-families (models, reports, logs, the table).
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
read -r -a sf_args <<<"${SF_ARGS:-}"
PORT=${PORT:-18480}
OUT=${OUT:-.cache/bench-families}
archs=("$@")
((${#archs[@]})) || archs=(qwen3 qwen3moe gemma4 qwen35 qwen35moe)

[[ -x $SF ]] || { echo "$0: $SF is missing: run make bench-families (or make build)" >&2; exit 1; }
[[ -z $LLAMA_SERVER || -x $LLAMA_SERVER ]] || { echo "$0: LLAMA_SERVER=$LLAMA_SERVER is not an executable" >&2; exit 1; }
command -v curl >/dev/null || { echo "$0: needs curl" >&2; exit 1; }
command -v jq >/dev/null || { echo "$0: needs jq" >&2; exit 1; }
mkdir -p "$OUT"

# Each server runs on its own port; both stay up while an architecture is
# measured, and conversations alternate between them (which goes first
# swaps each round), so that drift on a shared machine falls on both.
pids=()
stop_servers() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
trap stop_servers EXIT
trap 'exit 130' INT TERM

# start PORT LOG CMD…: one server in the background, ready once /health is 200.
start() {
	local port=$1 log=$2 i p
	shift 2
	echo "+ $*" | tee "$log" >&2
	"$@" >>"$log" 2>&1 &
	p=$!
	pids+=("$p")
	for ((i = 0; i < 600; i++)); do
		curl -sf -o /dev/null "http://127.0.0.1:$port/health" && return 0
		kill -0 "$p" 2>/dev/null || { echo "$0: the server exited; $log ends:" >&2; tail -n 20 "$log" >&2; exit 1; }
		sleep 0.5
	done
	echo "$0: no server ready after 5 minutes ($log)" >&2
	exit 1
}

# measure NAME ARCH PORT ROUND: conversation ROUND (its prose chosen by
# --seed) against the server on PORT.
measure() {
	local name=$1 arch=$2 port=$3 round=$4
	local cmd=("$SF" bench --url "http://127.0.0.1:$port" --scenario diverge --prompt-tokens "$PROMPT_TOKENS"
		--requests 1 --seed "$round" --max-tokens "$MAX_TOKENS" -o "$OUT/report-$name-$arch-$round.json")
	echo "+ ${cmd[*]}" >&2
	"${cmd[@]}" >/dev/null || echo "$0: bench against $name on $arch exited with $?" >&2
}

# merge NAME ARCH: the rounds' reports as one list of [cold, edit, 2nd]
# rows (ttft ms, cached share).
merge() {
	local files=("$OUT"/report-"$1"-"$2"-*.json)
	[[ -s ${files[0]} ]] || return 0
	jq -s '[.[] | .diverge | select(. != null) | {cold: .cold.ttft_ms.p50, edit: .diverged.ttft_ms.p50,
		second: .second_turn.ttft_ms.p50, edit_share: .diverged.cached_prompt_share, second_share: .second_turn.cached_prompt_share}]' "${files[@]}" > "$OUT/rounds-$1-$2.json"
}

for arch in "${archs[@]}"; do
	[[ -z ${TABLE_ONLY:-} ]] || break
	model=$OUT/synth-$arch-$SHAPE-$TYPE.gguf
	[[ -s $model ]] || "$SF" model synth --arch "$arch" --shape "$SHAPE" --type "$TYPE" -o "$model" >&2
	rm -f "$OUT"/report-*-"$arch"-*.json "$OUT"/rounds-*-"$arch".json
	start "$PORT" "$OUT/serve-ours-$arch.log" "$SF" serve --model "$model" --port "$PORT" --threads "$THREADS" --lanes "$LANES" --ctx "$CTX" --park-dir off --data-dir off "${sf_args[@]}"
	names=(ours)
	if [[ -n $LLAMA_SERVER ]]; then
		start $((PORT + 1)) "$OUT/serve-llama-$arch.log" "$LLAMA_SERVER" -m "$model" --port $((PORT + 1)) -t "$THREADS" -np "$LANES" --kv-unified -c "$CTX" --jinja
		names=(ours llama)
	fi
	for ((r = 1; r <= REQUESTS; r++)); do
		order=("${names[@]}")
		((r % 2)) || order=($(printf '%s\n' "${names[@]}" | tac))
		for name in "${order[@]}"; do
			port=$PORT
			[[ $name == llama ]] && port=$((PORT + 1))
			measure "$name" "$arch" "$port" "$r"
		done
	done
	stop_servers
	for name in "${names[@]}"; do merge "$name" "$arch"; done
done

# The table's jq helpers: the median of the values present, and a cell.
jq_defs='
def med: map(select(. != null)) | sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def v(x): if x == null then "-" else (x * 1000 | round / 1000 | tostring) end;
'
# The conversations the table's medians are over: the first family's
# rounds (REQUESTS when this run measured nothing readable).
conversations=$(jq length "$OUT/rounds-ours-${archs[0]}.json" 2>/dev/null || echo "$REQUESTS")
row() { printf '%-10s %-12s %8s %10s %10s %10s %10s\n' "$@"; }
{
	row family server "cold ms" "edit share" "edit ms" "2nd share" "2nd ms"
	for arch in "${archs[@]}"; do
		for name in ours llama; do
			r=$OUT/rounds-$name-$arch.json
			[[ -s $r ]] || continue
			IFS=$'\t' read -r -a cells < <(jq -r "$jq_defs"'
				[ v(map(.cold) | med), v(map(.edit_share) | med), v(map(.edit) | med), v(map(.second_share) | med), v(map(.second) | med) ] | @tsv' "$r")
			row "$arch" "$([[ $name == ours ]] && echo superfluid || echo llama-server)" "${cells[@]}"
		done
		a=$OUT/rounds-ours-$arch.json b=$OUT/rounds-llama-$arch.json
		[[ -s $a && -s $b ]] || continue
		IFS=$'\t' read -r -a cells < <(jq -rn --slurpfile a "$a" --slurpfile b "$b" "$jq_defs"'
			def paired(k): [range([$a[0], $b[0]] | map(length) | min) | [$a[0][.][k], $b[0][.][k]] | select(all(. != null)) | .[0] / .[1]] | med;
			[ v(paired("cold")), "-", v(paired("edit")), "-", v(paired("second")) ] | @tsv')
		row "$arch" "ours/theirs" "${cells[@]}"
	done
	echo "p50 time to first token in ms over $conversations conversations, alternating between the servers; shares of the prompt found cached;"
	echo "ours/theirs: the median of the conversations' paired ratios. synth $SHAPE $TYPE, $PROMPT_TOKENS-token openings edited after 85%,"
	echo "--threads $THREADS, $LANES lanes (-np $LANES --kv-unified), context $CTX."
	echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg). Reports and logs: $OUT/"
} | tee "$OUT/table.txt"

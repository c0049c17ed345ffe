#!/usr/bin/env bash
# Two superfluid builds side by side on one model (issue 23's step sizing
# was measured so): prefill of a fresh ~1,500-token prompt and decode at 1
# and 8 streams, alternating which build goes first each round, then
# fim-under-load (4 background prompts of 2,000 tokens) on each in turn.
# Reports per-round figures and the median of the paired after/before
# ratios. Both servers stay loaded; only one works at a time. BEFORE may be
# llama-server (a binary of that name), started with the same lanes,
# context and threads (-np 8 --kv-unified -c 16384 -t 2: one pool of
# cells, as ours, so that 2,000-token background prompts fit), to measure
# against it.
# superfluid runs without park or data directories: park files an earlier
# run left for the same prompts would serve the cold ones warm.
#
#   bench/pair.sh BEFORE_BIN AFTER_BIN MODEL.gguf [ROUNDS]
#
# FIM requests ask for all their tokens (--fim-ignore-eos): llama-server's
# infill sampler ends them after one token on a random-weight model.
# Environment: FIM=0 skips fim-under-load; FIMN (6) FIM requests a phase,
# FIMDUR (120s) after which a phase starts no new one;
# KINDS (prefill decode1 decode8) the paired phases; PA, PB (18741, 18742)
# the two servers' ports; LOGS (.cache/bench-pair) their logs.
set -u
BEFORE=$1 AFTER=$2 MODEL=$3 ROUNDS=${4:-3}
PA=${PA:-18741} PB=${PB:-18742} LOGS=${LOGS:-.cache/bench-pair}
KINDS=${KINDS:-prefill decode1 decode8}
mkdir -p "$LOGS"
start() { # bin port
  case $(basename "$1") in
  llama-server*) "$1" -m "$MODEL" --port "$2" -np 8 --kv-unified -c 16384 -t 2 > "$LOGS/serve-$2.log" 2>&1 & ;;
  *) "$1" serve -m "$MODEL" --port "$2" --lanes 8 --ctx 16384 --threads 2 --park-dir off --data-dir off > "$LOGS/serve-$2.log" 2>&1 & ;;
  esac
  echo $! > "$LOGS/serve-$2.pid"
  for _ in $(seq 120); do curl -sf "localhost:$2/health" > /dev/null && return; sleep 1; done
  echo "server $1 did not start (see $LOGS/serve-$2.log)"; exit 1
}
stop() { kill "$(cat "$LOGS/serve-$1.pid")" 2> /dev/null; }
trap 'stop $PA; stop $PB' EXIT
start "$BEFORE" $PA; start "$AFTER" $PB
python3 - $PA $PB "$ROUNDS" "$KINDS" <<'PY'
import json, random, statistics, sys, threading, time, urllib.request
pa, pb, rounds, kinds = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split()
words = ['alpha', 'beta', 'gamma', 'delta', 'kappa', 'omega', 'sigma', 'theta', 'lambda', 'zeta']
def prompt(seed, n=235):  # 235 words: about 1,500 tokens
    r = random.Random(seed)
    return ' '.join(r.choice(words) + str(r.randint(0, 999)) for _ in range(n))
def post(port, body):
    req = urllib.request.Request(f'http://127.0.0.1:{port}/completion', data=json.dumps(body).encode(), headers={'Content-Type': 'application/json'})
    return json.load(urllib.request.urlopen(req))
def prefill(port, seed):
    t = time.time(); r = post(port, {'prompt': prompt(seed), 'n_predict': 1, 'cache_prompt': False})
    return r['timings']['prompt_n'] / (time.time() - t)
def decode(port, seed, streams):
    out = [None] * streams
    def one(i): out[i] = post(port, {'prompt': prompt(seed * 100 + i, 8), 'n_predict': 48, 'temperature': 0, 'ignore_eos': True})
    ts = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
    [x.start() for x in ts]; [x.join() for x in ts]
    return sum(o['timings']['predicted_n'] for o in out) / max(o['timings']['predicted_ms'] for o in out) * 1000
for kind in kinds:
    ratios = []
    for i in range(rounds):
        got = {}
        for j, p in enumerate([pa, pb] if i % 2 == 0 else [pb, pa]):
            seed = 5000 + 10 * i + j
            got[p] = prefill(p, seed) if kind == 'prefill' else decode(p, seed, int(kind[6:]))
        ratios.append(got[pb] / got[pa])
        print(f'  {kind} round {i}: before {got[pa]:.1f}, after {got[pb]:.1f} tok/s', flush=True)
    print(f'{kind}: median paired after/before {statistics.median(ratios):.3f}', flush=True)
PY
if [ "${FIM:-1}" = 1 ]; then
  for p in $PA $PB; do
    "$AFTER" bench --url "http://127.0.0.1:$p" -s fim-under-load -c 4 -n "${FIMN:-6}" --prompt-tokens 2000 --seed 3 --fim-ignore-eos --duration "${FIMDUR:-120s}" > "$LOGS/fim-$p.json"
    python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["fim"]; print(sys.argv[2], "FIM idle p50/p95 %.0f/%.0f ms, loaded p50/p95 %.0f/%.0f ms, loaded/idle p95 %.2f" % (f["idle"]["latency_ms"]["p50"], f["idle"]["latency_ms"]["p95"], f["loaded"]["latency_ms"]["p50"], f["loaded"]["latency_ms"]["p95"], f["latency_ratio_p95"]))' "$LOGS/fim-$p.json" "$([ $p = $PA ] && echo before || echo after)"
  done
fi

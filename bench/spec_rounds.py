#!/usr/bin/env python3
"""Paired speculation rounds for bench/spec_draft.sh and bench/spec_mtp.sh:
decode at 1 and 4 streams on two servers (ours on PO, the baseline on PL),
alternating which goes first each round; prints each round's tokens/s and
drafts, and the median ratio.

    spec_rounds.py PO PL ROUNDS SETUP
"""
import json, random, statistics, sys, threading, urllib.request
po, pl, rounds, setup = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
words = ['alpha', 'beta', 'gamma', 'delta', 'kappa', 'omega', 'sigma', 'theta', 'lambda', 'zeta']
def prompt(seed, n=40):
    r = random.Random(seed)
    return ' '.join(r.choice(words) + str(r.randint(0, 999)) for _ in range(n))
def post(port, body):
    req = urllib.request.Request(f'http://127.0.0.1:{port}/completion', data=json.dumps(body).encode(), headers={'Content-Type': 'application/json'})
    return json.load(urllib.request.urlopen(req, timeout=900))
def decode(port, seed, streams):
    out = [None] * streams
    def one(i): out[i] = post(port, {'prompt': prompt(seed * 100 + i), 'n_predict': 48, 'temperature': 0, 'ignore_eos': True, 'cache_prompt': False})
    # the generation only, from each reply's own timings (prefill apart)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
    [x.start() for x in ts]; [x.join() for x in ts]
    pred = sum(o['timings']['predicted_n'] for o in out)
    pms = max(o['timings']['predicted_ms'] for o in out) / 1000
    dn = sum(o['timings'].get('draft_n', 0) or 0 for o in out); da = sum(o['timings'].get('draft_n_accepted', 0) or 0 for o in out)
    return pred / pms, dn, da
for streams in (1, 4):
    ratios = []
    for r in range(rounds):
        order = [('ours', po), ('llama', pl)] if r % 2 == 0 else [('llama', pl), ('ours', po)]
        got = {}
        for name, port in order:
            got[name] = decode(port, 1000 * r + streams, streams)
        ratios.append(got['ours'][0] / got['llama'][0])
        print(f"{setup} streams={streams} round {r}: ours {got['ours'][0]:.2f} tok/s (drafts {got['ours'][1]}/{got['ours'][2]} acc), llama-server {got['llama'][0]:.2f} (drafts {got['llama'][1]}/{got['llama'][2]} acc), ratio {ratios[-1]:.3f}", flush=True)
    print(f"{setup} streams={streams}: median ours/llama-server {statistics.median(ratios):.3f}", flush=True)

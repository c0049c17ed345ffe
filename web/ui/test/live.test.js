import { test } from "node:test";
import assert from "node:assert/strict";
import * as live from "../live.js";
import * as plot from "../plot.js";

const status = {
  models: [{
    name: "alpha", kind: "generation", size_bytes: 2048, context: 4096, lanes: 2, lanes_busy: 1, pinned: true,
    cache: { hits: 3, misses: 1, hit_rate: 0.75, resident: { entries: 2, tokens: 300, bytes: 4096, hits: 2 }, host: { entries: 1, tokens: 100, bytes: 1024, hits: 1 }, parked: { entries: 0, tokens: 0, bytes: 0, hits: 0 } },
  }, { name: "emb", kind: "embedding", size_bytes: 10, context: 512, lanes: 0, expires_at: "2026-12-02T05:01:00Z" }],
  lanes: [
    { model: "alpha", index: 0, phase: "decode", class: "interactive", api: "openai", generated_tokens: 12, tokens_per_s: 33.3 },
    { model: "alpha", index: 1, phase: "prefill", class: "batch", prompt_tokens: 500, prefilled_tokens: 128 },
    { model: "alpha", index: 2, phase: "idle" },
  ],
  queues: [{ class: "interactive", waiting: 0, oldest_wait_ms: 0 }, { class: "batch", waiting: 2, oldest_wait_ms: 1500 }],
  preemptions: 4,
  throughput: { interval_s: 1, samples: [] },
};

test("view: lanes busy and idle, with what each has done", () => {
  const v = live.view(status, Date.parse("2026-12-02T05:00:00Z"));
  assert.equal(v.busyLanes, 2);
  assert.deepEqual(v.lanes.map((l) => l.cells), [
    ["alpha", "0", "interactive (openai)", "decode", "12", "33.3 tok/s"],
    ["alpha", "1", "batch", "prefill", "128/500 in", ""],
    ["alpha", "2", "", "idle", "", ""],
  ]);
  assert.deepEqual(v.lanes.map((l) => l.busy), [true, true, false]);
});

test("view: models, queues, tiers, preemptions", () => {
  const v = live.view(status, Date.parse("2026-12-02T05:00:00Z"));
  assert.deepEqual(v.models.map((m) => m.cells), [
    ["alpha", "2.0 KiB", "4096", "1/2", "never (resident)"],
    ["emb", "10 B", "512", "embedding", "in 1m 00s"],
  ]);
  assert.deepEqual(v.queues.map((q) => q.cells), [["interactive", "0", ""], ["batch", "2", "1.50 s"]]);
  assert.deepEqual(v.tiers.map((t) => t.cells[1]), ["resident", "host", "parked"]);
  assert.deepEqual(v.tiers[0].cells, ["alpha", "resident", "2", "300", "4.0 KiB", "2"]);
  assert.equal(v.preemptions, "4 preemptions by the models loaded, since each loaded");
  assert.equal(v.hitRates, "alpha: 75% of 4 admissions warm");
});

test("view of an empty or partial document does not throw", () => {
  const v = live.view({}, 0);
  assert.deepEqual([v.models, v.lanes, v.queues, v.tiers, v.samples], [[], [], [], [], []]);
  assert.equal(live.isStatus({}), false);
  assert.equal(live.isStatus(null), false);
  assert.equal(live.isStatus(status), true);
  assert.equal(live.isStatus({ models: null, lanes: null, queues: null }), true, "a server still loading");
  assert.equal(live.isStatus([]), false);
  const loading = live.view({ models: null, lanes: null, queues: null, throughput: { samples: null } }, 0);
  assert.deepEqual([loading.models, loading.lanes, loading.samples], [[], [], []]);
});

test("plot: niceCeil picks 1, 2 or 5 times a power of ten", () => {
  assert.deepEqual([0, 0.5, 1, 1.1, 3, 7, 10, 11, 260, 999].map(plot.niceCeil), [1, 1, 1, 2, 5, 10, 10, 20, 500, 1000]);
});

test("plot: geometry places the newest sample at the right edge and keeps the last span", () => {
  const at = (s) => new Date(Date.parse("2026-12-02T05:00:00Z") + s * 1000).toISOString();
  const samples = [
    { at: at(0), prompt_tokens_per_s: 100, generated_tokens_per_s: 0 },
    { at: at(50), prompt_tokens_per_s: 0, generated_tokens_per_s: 40 },
    { at: at(100), prompt_tokens_per_s: 0, generated_tokens_per_s: 20 },
  ];
  const g = plot.geometry(samples, 200, 100, 300 * 1000);
  assert.equal(g.top, 100);
  assert.equal(g.span, 100 * 1000, "100 s of samples fill the plot, not 300");
  assert.deepEqual(g.generated, [[0, 100], [100, 60], [200, 80]]);
  assert.deepEqual(g.prompt[0], [0, 0]);
  const narrow = plot.geometry(samples, 200, 100, 50 * 1000);
  assert.equal(narrow.generated.length, 2);
  assert.equal(narrow.top, 50);
  assert.equal(narrow.span, 50 * 1000);
  const young = plot.geometry(samples.slice(2), 200, 100, 300 * 1000);
  assert.equal(young.span, plot.minSpan, "one sample is plotted over the narrowest window");
  assert.deepEqual(young.generated, [[200, 0]], "its rate is the top of its own scale");
  assert.deepEqual(plot.geometry([], 10, 10, 1000), { top: 1, span: plot.minSpan, prompt: [], generated: [] });
});

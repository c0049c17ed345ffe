import { test } from "node:test";
import assert from "node:assert/strict";
import * as fmt from "../format.js";

test("rate: one decimal below 100 tok/s, none above, a dash when unknown", () => {
  assert.equal(fmt.rate(9.87), "9.9 tok/s");
  assert.equal(fmt.rate(0), "0.0 tok/s");
  assert.equal(fmt.rate(123.6), "124 tok/s");
  assert.equal(fmt.rate(null), "–");
  assert.equal(fmt.rate(NaN), "–");
  assert.equal(fmt.rate(Infinity), "–");
  assert.equal(fmt.rate(-1), "–");
});

test("duration: ms, seconds, minutes", () => {
  assert.equal(fmt.duration(850.4), "850 ms");
  assert.equal(fmt.duration(1250), "1.25 s");
  assert.equal(fmt.duration(125000), "2m 05s");
  assert.equal(fmt.duration(undefined), "–");
});

test("bytes in binary units", () => {
  assert.equal(fmt.bytes(512), "512 B");
  assert.equal(fmt.bytes(1536), "1.5 KiB");
  assert.equal(fmt.bytes(3 * 1024 ** 3), "3.0 GiB");
  assert.equal(fmt.bytes(-1), "–");
});

test("percent is clamped and whole", () => {
  assert.equal(fmt.percent(0.754), "75%");
  assert.equal(fmt.percent(1.2), "100%");
  assert.equal(fmt.percent(null), "–");
});

test("statsLine writes what is known", () => {
  assert.equal(fmt.statsLine({ tokens: 11, tokPerSec: 10, ttftMs: 250, promptTokens: 200, cachedShare: 0.75 }),
    "11 tokens · 10.0 tok/s · first token 250 ms · prompt 200 tokens, 75% cached");
  assert.equal(fmt.statsLine({ tokens: null, tokPerSec: null, ttftMs: 40, promptTokens: null, cachedShare: null }), "first token 40 ms");
});

test("expiry: never, now, in a while", () => {
  const now = Date.parse("2026-12-02T05:00:00Z");
  assert.equal(fmt.expiry(undefined, now), "never");
  assert.equal(fmt.expiry("2026-12-02T05:00:30Z", now), "in 30.00 s");
  assert.equal(fmt.expiry("2026-12-02T04:59:00Z", now), "now");
  assert.equal(fmt.expiry("2318-04-11T23:47:16Z", now), "never");
});

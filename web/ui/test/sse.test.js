import { test } from "node:test";
import assert from "node:assert/strict";
import { SSEParser } from "../sse.js";

function all(chunks) {
  const p = new SSEParser();
  const out = [];
  for (const c of chunks) out.push(...p.push(c));
  out.push(...p.end());
  return out;
}

test("events end at a blank line, data lines join with newlines", () => {
  const evs = all(["data: a\ndata: b\n\nevent: status\ndata: {}\n\n"]);
  assert.deepEqual(evs.map((e) => [e.event, e.data]), [["message", "a\nb"], ["status", "{}"]]);
});

test("a stream cut at any byte gives the same events", () => {
  const text = 'data: {"x":1}\r\n\r\n: keep-alive\n\nevent: e\r\ndata:no-space\r\rdata: [DONE]\n\n';
  const whole = all([text]);
  assert.deepEqual(whole.map((e) => e.data), ['{"x":1}', "no-space", "[DONE]"]);
  for (let i = 0; i <= text.length; i++) {
    assert.deepEqual(all([text.slice(0, i), text.slice(i)]), whole, `cut at ${i}`);
  }
  assert.deepEqual(all([...text]), whole, "one character at a time");
});

test("comments and unknown fields are skipped; a field without colon is empty", () => {
  const evs = all([": hi\nretry: 5\nfoo: bar\ndata\n\n"]);
  assert.deepEqual(evs.map((e) => e.data), [""]);
});

test("a last event without its blank line is still delivered", () => {
  assert.deepEqual(all(["data: last"]).map((e) => e.data), ["last"]);
  assert.deepEqual(all(["data: last\n"]).map((e) => e.data), ["last"]);
});

test("blank lines alone give no event", () => {
  assert.deepEqual(all(["\n\n\r\n"]), []);
});

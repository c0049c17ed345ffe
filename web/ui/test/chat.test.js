import { test } from "node:test";
import assert from "node:assert/strict";
import * as chat from "../chat.js";

const delta = (d, finish = null) => ({ choices: [{ index: 0, delta: d, finish_reason: finish }] });

test("content and reasoning deltas accumulate apart; the first one dates the first token", () => {
  let m = chat.newAssistant("tiny", 100);
  m = chat.applyChunk(m, delta({ role: "assistant", content: "" }), 110);
  assert.equal(m.t.first, null, "an empty role chunk is no token");
  m = chat.applyChunk(m, delta({ reasoning_content: "think" }), 150);
  m = chat.applyChunk(m, delta({ content: "Hel" }), 170);
  m = chat.applyChunk(m, delta({ content: "lo" }), 180);
  m = chat.applyChunk(m, delta({}, "stop"), 190);
  assert.equal(m.content, "Hello");
  assert.equal(m.reasoning, "think");
  assert.equal(m.t.first, 150);
  assert.equal(m.finish, "stop");
});

test("applyChunk leaves the message it was given unchanged", () => {
  const m = chat.newAssistant("tiny", 0);
  const frozen = JSON.stringify(m);
  chat.applyChunk(m, delta({ content: "x", tool_calls: [{ index: 0, id: "c", function: { name: "f", arguments: "" } }] }), 1);
  assert.equal(JSON.stringify(m), frozen);
});

test("tool calls: the head names the call, later fragments of its index append arguments", () => {
  let m = chat.newAssistant("tiny", 0);
  m = chat.applyChunk(m, delta({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } }] }), 5);
  m = chat.applyChunk(m, delta({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }), 6);
  m = chat.applyChunk(m, delta({ tool_calls: [{ index: 1, id: "call_2", function: { name: "now", arguments: "{}" } }] }), 7);
  m = chat.applyChunk(m, delta({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }), 8);
  assert.deepEqual(m.toolCalls.map((c) => [c.id, c.name, c.arguments]), [
    ["call_1", "get_weather", '{"city":"Paris"}'],
    ["call_2", "now", "{}"],
  ]);
  assert.equal(m.t.first, 5);
});

test("an error event and other choices", () => {
  let m = chat.newAssistant("tiny", 0);
  m = chat.applyChunk(m, { choices: [{ index: 1, delta: { content: "other" } }] }, 1);
  assert.equal(m.content, "");
  m = chat.applyChunk(m, { error: { message: "model unloaded", type: "server_error" } }, 2);
  assert.equal(m.error, "model unloaded");
  assert.equal(chat.errorText({ error: "ollama shape" }), "ollama shape");
});

test("stats: time to first token, decode speed after it, cached share of the prompt", () => {
  let m = chat.newAssistant("tiny", 1000);
  m = chat.applyChunk(m, delta({ content: "a" }), 1250);
  m = chat.applyChunk(m, { choices: [], usage: { prompt_tokens: 200, completion_tokens: 11, total_tokens: 211, prompt_tokens_details: { cached_tokens: 150 } } }, 2200);
  m = chat.finish(m, 2250, false);
  const st = chat.stats(m);
  assert.equal(st.ttftMs, 250);
  assert.equal(st.tokPerSec, 10); // 10 tokens after the first, in 1 s
  assert.equal(st.cachedShare, 0.75);
  assert.equal(st.tokens, 11);
});

test("stats: the server's decode rate wins over the page's clock", () => {
  let m = chat.newAssistant("tiny", 0);
  m = chat.applyChunk(m, delta({ content: "a" }), 10);
  m = chat.applyChunk(m, { choices: [], usage: { prompt_tokens: 5, completion_tokens: 16 }, timings: { predicted_n: 16, predicted_ms: 400, predicted_per_second: 40 } }, 10.5);
  m = chat.finish(m, 11, false);
  assert.equal(chat.stats(m).tokPerSec, 40, "16 tokens that arrived within 1 ms are not 15000 tok/s");
  m = chat.applyChunk(m, { choices: [], timings: { predicted_per_second: 0 } }, 11);
  assert.equal(chat.stats(m).tokPerSec, 15000, "no server rate: the page's own measure");
});

test("stats: unknown figures stay null (no usage, one token, stopped)", () => {
  let m = chat.newAssistant("tiny", 0);
  assert.deepEqual(chat.stats(m), { ttftMs: null, tokPerSec: null, tokens: null, promptTokens: null, cachedTokens: null, cachedShare: null });
  m = chat.applyChunk(m, delta({ content: "a" }), 10);
  m = chat.finish(m, 20, true);
  assert.equal(m.finish, "stopped");
  const st = chat.stats(m);
  assert.equal(st.ttftMs, 10);
  assert.equal(st.tokPerSec, null);
  m = chat.applyChunk(m, { choices: [], usage: { prompt_tokens: 0, completion_tokens: 1 } }, 20);
  assert.equal(chat.stats(m).tokPerSec, null);
  assert.equal(chat.stats(m).cachedShare, null);
});

test("requestBody: system prompt, settings as numbers, empty ones left to the server, failed replies dropped", () => {
  const msgs = [
    { role: "user", content: "hi" },
    { ...chat.newAssistant("tiny", 0), content: "hello" },
    { role: "user", content: "again" },
    { ...chat.newAssistant("tiny", 0), error: "boom" },
    { role: "user", content: "once more" },
  ];
  const body = chat.requestBody("tiny", msgs, { system: "be brief", temperature: "0.5", top_p: "", max_tokens: "64", seed: " 7 " });
  assert.deepEqual(body, {
    model: "tiny",
    messages: [
      { role: "system", content: "be brief" },
      { role: "user", content: "hi" },
      { role: "assistant", content: "hello" },
      { role: "user", content: "again" },
      { role: "user", content: "once more" },
    ],
    stream: true,
    stream_options: { include_usage: true },
    temperature: 0.5,
    max_tokens: 64,
    seed: 7,
  });
});

test("settingsError names the setting that is out of range", () => {
  assert.equal(chat.settingsError({ temperature: "0.7", top_p: "1", max_tokens: "10", seed: "-3" }), "");
  assert.match(chat.settingsError({ temperature: "3" }), /^temperature/);
  assert.match(chat.settingsError({ top_p: "abc" }), /^top_p/);
  assert.match(chat.settingsError({ max_tokens: "1.5" }), /^max_tokens/);
  assert.match(chat.settingsError({ max_tokens: "0" }), /^max_tokens/);
  assert.match(chat.settingsError({ seed: "1e300" }), /^seed/);
  assert.match(chat.settingsError({ temperature: "Infinity" }), /^temperature/);
});

test("regenerate drops the last reply; edit keeps what came before the edited message", () => {
  const msgs = [{ role: "user", content: "a" }, { role: "assistant", content: "b" }, { role: "user", content: "c" }, { role: "assistant", content: "d" }];
  assert.deepEqual(chat.forRegenerate(msgs), msgs.slice(0, 3));
  assert.equal(chat.forRegenerate(msgs.slice(0, 3)), null);
  assert.deepEqual(chat.forEdit(msgs, 2, "C"), [msgs[0], msgs[1], { role: "user", content: "C" }]);
  assert.equal(chat.forEdit(msgs, 1, "x"), null, "a reply is regenerated, not edited");
  assert.equal(chat.forEdit(msgs, 9, "x"), null);
});

test("titleOf is the first user message's first words", () => {
  assert.equal(chat.titleOf([]), "New chat");
  assert.equal(chat.titleOf([{ role: "user", content: "  hello\n world " }]), "hello world");
  assert.equal(chat.titleOf([{ role: "user", content: "x".repeat(80) }]).length, 40);
});

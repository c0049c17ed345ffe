import { test } from "node:test";
import assert from "node:assert/strict";
import { Client, keyName } from "../api.js";
import * as store from "../store.js";

class Memory {
  constructor() { this.m = new Map(); }
  getItem(k) { return this.m.has(k) ? this.m.get(k) : null; }
  setItem(k, v) { this.m.set(k, String(v)); }
}

test("a 401 asks for the key once, keeps it and sends it as a bearer token", async () => {
  const storage = new Memory();
  const seen = [];
  let asked = 0;
  const fetchFn = async (path, init) => {
    const auth = init.headers.get("Authorization");
    seen.push(auth);
    return { status: auth === "Bearer s3cret" ? 200 : 401 };
  };
  const c = new Client(storage, async () => { asked++; return "s3cret"; }, fetchFn);
  assert.equal((await c.fetch("/v1/models")).status, 200);
  assert.equal((await c.fetch("/v1/models")).status, 200);
  assert.deepEqual(seen, [null, "Bearer s3cret", "Bearer s3cret"]);
  assert.equal(asked, 1);
  assert.equal(storage.getItem(keyName), "s3cret");
});

test("json: an error answer throws with its status and the API's message", async () => {
  const c = new Client(new Memory(), async () => "", async () => ({
    status: 503, ok: false, statusText: "Service Unavailable",
    json: async () => ({ error: { message: "the model is loading" } }),
  }));
  await assert.rejects(c.json("/v1/models"), (e) => e.status === 503 && e.message === "/v1/models: 503 the model is loading");
});

test("declining the key gives the 401 back", async () => {
  const c = new Client(new Memory(), async () => "", async () => ({ status: 401 }));
  assert.equal((await c.fetch("/x")).status, 401);
});

test("conversations round-trip; a reply the page closed during is marked stopped; junk is dropped", () => {
  const s = new Memory();
  const convs = [
    { id: "a", title: "t", messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "he", t: { start: 5, first: 9, end: null } }], updated: 2 },
    { id: "b", title: "u", messages: [], updated: 3 },
  ];
  assert.equal(store.saveConversations(s, convs), true);
  const back = store.loadConversations(s);
  assert.deepEqual(back.map((c) => c.id), ["b", "a"]);
  assert.equal(back[1].messages[1].finish, "stopped");
  assert.equal(back[1].messages[1].t.end, 9);
  s.setItem(store.conversationsName, '[1, {"id": 2}, {"id": "ok", "messages": []}]');
  assert.deepEqual(store.loadConversations(s).map((c) => c.id), ["ok"]);
  s.setItem(store.conversationsName, "{not json");
  assert.deepEqual(store.loadConversations(s), []);
});

test("a full storage keeps the newest conversations that fit", () => {
  const s = new Memory();
  s.setItem = function (k, v) {
    if (v.length > 200) throw new Error("QuotaExceededError");
    this.m.set(k, v);
  };
  const convs = Array.from({ length: 8 }, (_, i) => ({ id: `c${i}`, title: "x", messages: [], updated: i }));
  assert.equal(store.saveConversations(s, convs), false);
  const kept = store.loadConversations(s);
  assert.ok(kept.length > 0 && kept.length < 8);
  assert.equal(kept[0].id, "c7");
});

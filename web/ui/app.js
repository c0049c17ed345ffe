// The page: the chat wired to the DOM, and the tabs. What decides
// lives in the modules it imports (chat.js, format.js; the live view in
// liveview.js over live.js and plot.js), which have unit tests.
import { Client } from "./api.js";
import * as chat from "./chat.js";
import * as fmt from "./format.js";
import { follow } from "./liveview.js";
import { readEvents } from "./sse.js";
import * as store from "./store.js";

const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};

const client = new Client(localStorage, askKey, (p, i) => fetch(p, i));
const settingFields = ["system", "temperature", "top_p", "max_tokens", "seed"];
const state = { conversations: store.loadConversations(localStorage), current: null, streaming: null, models: [] };

// askKey shows the key dialog and resolves with what was typed ("" for
// cancel). Concurrent 401s share one dialog.
let keyPrompt = null;
function askKey() {
  if (keyPrompt) return keyPrompt;
  const dialog = $("key-dialog");
  keyPrompt = new Promise((resolve) => {
    const done = (key) => {
      dialog.close();
      keyPrompt = null;
      resolve(key);
    };
    $("key-form").onsubmit = (e) => {
      e.preventDefault();
      done(e.submitter && e.submitter.value === "cancel" ? "" : $("key").value.trim());
    };
    dialog.oncancel = () => done("");
    $("key").value = "";
    dialog.showModal();
  });
  return keyPrompt;
}

// ---- conversations ----

function current() {
  return state.conversations.find((c) => c.id === state.current) || null;
}

function newConversation() {
  const c = { id: store.newID(Date.now(), Math.random()), title: "New chat", model: $("model").value, messages: [], updated: Date.now() };
  state.conversations.unshift(c);
  state.current = c.id;
  return c;
}

function save() {
  if (!store.saveConversations(localStorage, state.conversations)) {
    setStatus("the browser's storage is full: older conversations were not kept");
  }
}

function renderList() {
  const ul = $("conversations");
  ul.replaceChildren();
  for (const c of state.conversations) {
    const li = el("li", c.id === state.current ? "current" : "");
    li.append(el("span", "", c.title));
    const del = el("button", "", "×");
    del.title = "Delete";
    del.onclick = (e) => {
      e.stopPropagation();
      if (state.streaming && state.current === c.id) return;
      state.conversations = state.conversations.filter((x) => x !== c);
      if (state.current === c.id) state.current = null;
      save();
      renderAll();
    };
    li.append(del);
    li.onclick = () => {
      if (state.streaming) return;
      state.current = c.id;
      if (c.model && state.models.includes(c.model)) $("model").value = c.model;
      renderAll();
    };
    ul.append(li);
  }
}

function renderMessage(m, i, conv) {
  const div = el("div", `msg ${m.role}`);
  div.dataset.index = String(i);
  div.append(el("div", "role", m.role === "user" ? "You" : m.model || "assistant"));
  if (m.role === "assistant") {
    div.dataset.state = m.t.end === null ? "streaming" : "done";
    if (m.reasoning) {
      const d = el("details", "reasoning");
      d.open = m.t.end === null && m.content === "";
      d.append(el("summary", "", "Reasoning"), el("div", "", m.reasoning));
      div.append(d);
    }
    div.append(el("div", "content", m.content));
    for (const call of m.toolCalls) {
      const b = el("div", "tool");
      b.append(el("strong", "", `Tool call: ${call.name || "?"}`), el("pre", "", call.arguments));
      div.append(b);
    }
    if (m.error) div.append(el("div", "error", m.error));
    const st = chat.stats(m);
    const line = fmt.statsLine(st) + (m.finish === "stopped" ? " · stopped" : m.finish && m.finish !== "stop" ? ` · ${m.finish}` : "");
    div.append(el("div", "stats", line));
    if (m.t.end !== null && i === conv.messages.length - 1 && !state.streaming) {
      const acts = el("div", "actions");
      const regen = el("button", "regenerate", "Regenerate");
      regen.onclick = () => run(conv, chat.forRegenerate(conv.messages));
      acts.append(regen);
      div.append(acts);
    }
  } else {
    div.append(el("div", "content", m.content));
    if (!state.streaming) {
      const acts = el("div", "actions");
      const edit = el("button", "edit", "Edit");
      edit.onclick = () => editMessage(div, conv, i);
      acts.append(edit);
      div.append(acts);
    }
  }
  return div;
}

function editMessage(div, conv, i) {
  const ta = el("textarea");
  ta.value = conv.messages[i].content;
  ta.rows = 3;
  const ok = el("button", "", "Send");
  const cancel = el("button", "", "Cancel");
  ok.onclick = () => run(conv, chat.forEdit(conv.messages, i, ta.value));
  cancel.onclick = () => renderMessages();
  const acts = el("div", "actions");
  acts.append(ok, cancel);
  div.querySelector(".content").replaceWith(ta);
  div.querySelector(".actions").replaceWith(acts);
  ta.focus();
}

function renderMessages() {
  const box = $("messages");
  const conv = current();
  box.replaceChildren(...(conv ? conv.messages.map((m, i) => renderMessage(m, i, conv)) : []));
  box.scrollTop = box.scrollHeight;
}

function renderAll() {
  renderList();
  renderMessages();
  $("send").disabled = !!state.streaming;
  $("stop").disabled = !state.streaming;
}

function setStatus(text) {
  $("conn").textContent = text;
}

// ---- sending ----

function settings() {
  const s = {};
  for (const f of settingFields) s[f] = $(f).value;
  return s;
}

// run asks for a reply to messages (the conversation as it will be) and
// streams it into conv.
async function run(conv, messages) {
  if (!messages || state.streaming) return;
  const s = settings();
  const bad = chat.settingsError(s);
  if (bad) {
    setStatus(bad);
    $("settings").hidden = false;
    return;
  }
  const model = $("model").value;
  conv.model = model;
  conv.messages = [...messages, chat.newAssistant(model, performance.now())];
  conv.title = chat.titleOf(conv.messages);
  conv.updated = Date.now();
  const last = conv.messages.length - 1;
  const controller = new AbortController();
  state.streaming = controller;
  renderAll();
  let msg = conv.messages[last];
  let drawn = false;
  const redraw = () => {
    conv.messages[last] = msg;
    if (drawn) return;
    drawn = true;
    requestAnimationFrame(() => {
      drawn = false;
      const box = $("messages");
      const old = box.querySelector(`.msg[data-index="${last}"]`);
      if (old && current() === conv) old.replaceWith(renderMessage(msg, last, conv));
      box.scrollTop = box.scrollHeight;
    });
  };
  let stopped = false;
  try {
    const body = JSON.stringify(chat.requestBody(model, messages, s));
    const resp = await client.fetch("/v1/chat/completions", { method: "POST", headers: { "Content-Type": "application/json" }, body, signal: controller.signal });
    if (!resp.ok) {
      msg = chat.applyChunk(msg, (await resp.json().catch(() => null)) || { error: `${resp.status} ${resp.statusText}` }, performance.now());
    } else {
      await readEvents(resp, (ev) => {
        if (ev.data === "[DONE]") return;
        let v;
        try {
          v = JSON.parse(ev.data);
        } catch {
          return;
        }
        msg = chat.applyChunk(msg, v, performance.now());
        redraw();
      });
    }
  } catch (e) {
    if (controller.signal.aborted) stopped = true;
    else msg = { ...msg, error: String(e && e.message ? e.message : e) };
  }
  msg = chat.finish(msg, performance.now(), stopped);
  conv.messages[last] = msg;
  state.streaming = null;
  save();
  renderAll();
  refreshModels();
}

// ---- models ----

async function refreshModels() {
  try {
    const body = await client.json("/v1/models");
    const names = (body.data || []).map((m) => m.id).filter((x) => typeof x === "string");
    state.models = names;
    // Which are loaded now: the others load on their first request.
    const loaded = new Set();
    try {
      const st = await client.json("/v1/status");
      for (const m of st.models || []) loaded.add(m.name);
    } catch {
      // no status: the picker just does not say
    }
    const sel = $("model");
    const want = sel.value || (current() && current().model) || localStorage.getItem("superfluid.model") || names[0];
    sel.replaceChildren(...names.map((n) => {
      const o = el("option", "", loaded.has(n) ? `${n} (loaded)` : n);
      o.value = n;
      return o;
    }));
    if (names.includes(want)) sel.value = want;
    setStatus("");
  } catch (e) {
    setStatus(String(e.message || e));
    // 503: the server is still loading its models; ask again shortly.
    if (e.status === 503) setTimeout(refreshModels, 2000);
  }
}

async function unloadModel() {
  const model = $("model").value;
  if (!model) return;
  try {
    await client.json("/api/generate", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ model, keep_alive: 0 }) });
    await refreshModels(); // clears the status line: say it after
    setStatus(`${model} unloaded`);
  } catch (e) {
    setStatus(String(e.message || e));
  }
}

// ---- the live view (liveview.js draws it) ----

let liveRun = null;

function showTab(name) {
  for (const t of ["chat", "live"]) {
    $(`${t}-view`).hidden = t !== name;
    $(`tab-${t}`).classList.toggle("active", t === name);
  }
  if (name === "live" && !liveRun) {
    liveRun = new AbortController();
    follow(client, liveRun.signal);
  } else if (name !== "live" && liveRun) {
    liveRun.abort();
    liveRun = null;
  }
}

// ---- start ----

function start() {
  const saved = store.loadSettings(localStorage);
  for (const f of settingFields) {
    $(f).value = typeof saved[f] === "string" ? saved[f] : "";
    $(f).addEventListener("change", () => store.saveSettings(localStorage, settings()));
  }
  $("tab-chat").onclick = () => showTab("chat");
  $("tab-live").onclick = () => showTab("live");
  $("settings-toggle").onclick = () => {
    const s = $("settings");
    s.hidden = !s.hidden;
    $("settings-toggle").setAttribute("aria-expanded", String(!s.hidden));
  };
  $("new-chat").onclick = () => {
    if (state.streaming) return;
    state.current = null;
    renderAll();
    $("prompt").focus();
  };
  $("model").onchange = () => localStorage.setItem("superfluid.model", $("model").value);
  $("unload").onclick = unloadModel;
  $("stop").onclick = () => state.streaming && state.streaming.abort();
  $("composer").onsubmit = (e) => {
    e.preventDefault();
    const text = $("prompt").value;
    if (text.trim() === "" || state.streaming) return;
    const conv = current() || newConversation();
    $("prompt").value = "";
    run(conv, [...conv.messages, { role: "user", content: text }]);
  };
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  state.current = state.conversations.length ? state.conversations[0].id : null;
  renderAll();
  refreshModels();
}

start();

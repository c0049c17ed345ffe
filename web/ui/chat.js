// The chat's state as pure functions: the request a conversation makes,
// the stream's chunks folded into the assistant's message, the figures
// shown under it. app.js does the DOM and the fetching.

// newAssistant is the message a reply streams into; start is when the
// request was sent (ms, performance.now()).
export function newAssistant(model, start) {
  return { role: "assistant", model, content: "", reasoning: "", toolCalls: [], finish: null, usage: null, timings: null, error: null, t: { start, first: null, end: null } };
}

// applyChunk folds one chat.completion.chunk (or an error event's body)
// into msg and returns the new message; msg is left as it was. now is
// when the chunk arrived, which dates the first token.
export function applyChunk(msg, chunk, now) {
  const next = { ...msg, t: { ...msg.t }, toolCalls: msg.toolCalls.map((c) => ({ ...c })) };
  if (chunk && chunk.error) {
    next.error = errorText(chunk);
    return next;
  }
  if (chunk && chunk.usage) next.usage = chunk.usage;
  if (chunk && chunk.timings) next.timings = chunk.timings; // the server's own rates, on the usage chunk
  for (const choice of (chunk && chunk.choices) || []) {
    if (choice.index !== undefined && choice.index !== 0) continue; // the page asks for one choice
    const d = choice.delta || {};
    let produced = false;
    if (typeof d.content === "string" && d.content !== "") {
      next.content += d.content;
      produced = true;
    }
    if (typeof d.reasoning_content === "string" && d.reasoning_content !== "") {
      next.reasoning += d.reasoning_content;
      produced = true;
    }
    for (const tc of d.tool_calls || []) {
      const i = Number.isInteger(tc.index) ? tc.index : next.toolCalls.length;
      let call = next.toolCalls.find((c) => c.index === i);
      if (!call) {
        call = { index: i, id: "", name: "", arguments: "" };
        next.toolCalls.push(call);
      }
      if (tc.id) call.id = tc.id;
      if (tc.function && tc.function.name) call.name += tc.function.name;
      if (tc.function && typeof tc.function.arguments === "string") call.arguments += tc.function.arguments;
      produced = true;
    }
    if (produced && next.t.first === null) next.t.first = now;
    if (choice.finish_reason) next.finish = choice.finish_reason;
  }
  return next;
}

// finish marks the reply ended (at now): by the stream's end, a stop or
// an error.
export function finish(msg, now, stopped) {
  const next = { ...msg, t: { ...msg.t, end: now } };
  if (stopped && !next.finish) next.finish = "stopped";
  return next;
}

// errorText is an API error body's message, in any of the server's
// shapes ({"error": {"message"}}, {"error": "…"}).
export function errorText(body) {
  if (!body) return "error";
  const e = body.error;
  if (typeof e === "string") return e;
  if (e && typeof e.message === "string") return e.message;
  return JSON.stringify(body);
}

// stats are the figures under a reply: time to first token (as the page
// saw it), the decode speed, and the share of the prompt the prefix cache
// served. The speed is the server's (timings.predicted_per_second) when
// it sent one: chunks that arrive together would make the page's own
// clock read any rate; else the tokens after the first over the time
// after it. A figure not known (no usage yet, a single token) is null.
export function stats(msg) {
  const out = { ttftMs: null, tokPerSec: null, tokens: null, promptTokens: null, cachedTokens: null, cachedShare: null };
  const { start, first, end } = msg.t;
  if (first !== null) out.ttftMs = first - start;
  const u = msg.usage;
  if (u) {
    out.tokens = u.completion_tokens ?? null;
    out.promptTokens = u.prompt_tokens ?? null;
    const cached = u.prompt_tokens_details ? u.prompt_tokens_details.cached_tokens : null;
    if (Number.isFinite(cached)) {
      out.cachedTokens = cached;
      if (out.promptTokens > 0) out.cachedShare = cached / out.promptTokens;
    }
  }
  const server = msg.timings ? msg.timings.predicted_per_second : null;
  if (Number.isFinite(server) && server > 0) {
    out.tokPerSec = server;
  } else if (out.tokens > 1 && first !== null && end !== null && end > first) {
    out.tokPerSec = (out.tokens - 1) / ((end - first) / 1000);
  }
  return out;
}

// settingsError says what is wrong with the sampling settings as typed
// (strings from the form), or "" when they are fine.
export function settingsError(s) {
  const checks = [
    ["temperature", 0, 2, false],
    ["top_p", 0, 1, false],
    ["max_tokens", 1, 1e9, true],
    ["seed", -(2 ** 53), 2 ** 53, true],
  ];
  for (const [name, lo, hi, integer] of checks) {
    const raw = (s[name] ?? "").trim();
    if (raw === "") continue;
    const v = Number(raw);
    if (!Number.isFinite(v) || v < lo || v > hi || (integer && !Number.isInteger(v))) {
      return `${name} must be ${integer ? "an integer" : "a number"} from ${lo} to ${hi}`;
    }
  }
  return "";
}

// requestBody is the /v1/chat/completions body for a conversation's
// messages under settings (the form's strings; empty means the server's
// default). Replies keep only their text: the page offers no tools, so a
// call the model made has no result to send back.
export function requestBody(model, messages, s) {
  const out = [];
  if ((s.system ?? "").trim() !== "") out.push({ role: "system", content: s.system });
  for (const m of messages) {
    if (m.role === "user") out.push({ role: "user", content: m.content });
    else if (m.role === "assistant" && !m.error && m.content !== "") out.push({ role: "assistant", content: m.content });
  }
  const body = { model, messages: out, stream: true, stream_options: { include_usage: true } };
  for (const name of ["temperature", "top_p", "max_tokens", "seed"]) {
    const raw = (s[name] ?? "").trim();
    if (raw !== "") body[name] = Number(raw);
  }
  return body;
}

// forRegenerate is the conversation with its last reply dropped, so that
// it can be asked again; null when it does not end in a reply.
export function forRegenerate(messages) {
  if (messages.length === 0 || messages[messages.length - 1].role !== "assistant") return null;
  return messages.slice(0, -1);
}

// forEdit is the conversation up to user message i, its text replaced:
// what followed it is dropped and asked again.
export function forEdit(messages, i, text) {
  if (i < 0 || i >= messages.length || messages[i].role !== "user") return null;
  return [...messages.slice(0, i), { role: "user", content: text }];
}

// titleOf is a conversation's name in the list: its first words.
export function titleOf(messages) {
  const first = messages.find((m) => m.role === "user");
  if (!first) return "New chat";
  const t = first.content.replace(/\s+/g, " ").trim();
  return t.length > 40 ? t.slice(0, 39) + "…" : t || "New chat";
}

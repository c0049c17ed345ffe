// Server-sent events, parsed from text as it arrives. The page reads its
// streams with fetch (EventSource cannot send the API key), so it parses
// them itself: the chat stream and /v1/status/events alike.

// SSEParser turns chunks of an event stream into events. Lines end in
// \n, \r\n or \r, and a chunk may end anywhere, even between \r and \n.
export class SSEParser {
  constructor() {
    this.buf = "";
    this.data = [];
    this.event = "";
    this.id = "";
    this.sawCR = false;
  }

  // push takes the next chunk of text and returns the events it ended,
  // each {event, data, id}; event is "message" when the stream named none.
  push(chunk) {
    const out = [];
    let text = chunk;
    if (this.sawCR && text.startsWith("\n")) text = text.slice(1); // the \n of a \r\n split across chunks
    this.sawCR = false;
    this.buf += text;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buf);
      if (!m) break;
      if (m[0] === "\r" && m.index === this.buf.length - 1) {
        this.sawCR = true; // a lone \r at the end: the next chunk may start with its \n
      }
      const line = this.buf.slice(0, m.index);
      this.buf = this.buf.slice(m.index + m[0].length);
      const ev = this.line(line);
      if (ev) out.push(ev);
    }
    return out;
  }

  // end flushes a last event the stream did not end with a blank line
  // (the spec drops it; a server cut short is better shown than lost).
  end() {
    const out = [];
    if (this.buf !== "") {
      const ev = this.line(this.buf);
      this.buf = "";
      if (ev) out.push(ev);
    }
    const ev = this.line("");
    if (ev) out.push(ev);
    return out;
  }

  line(line) {
    if (line === "") {
      if (this.data.length === 0) {
        this.event = "";
        return null;
      }
      const ev = { event: this.event || "message", data: this.data.join("\n"), id: this.id };
      this.data = [];
      this.event = "";
      return ev;
    }
    if (line.startsWith(":")) return null; // a comment (keep-alive)
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "data": this.data.push(value); break;
      case "event": this.event = value; break;
      case "id": this.id = value; break;
    }
    return null;
  }
}

// readEvents reads a fetch Response's body as server-sent events and
// calls onEvent for each, until the body ends or signal aborts.
export async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SSEParser();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    for (const ev of parser.push(decoder.decode(value, { stream: true }))) onEvent(ev);
  }
  for (const ev of parser.push(decoder.decode())) onEvent(ev);
  for (const ev of parser.end()) onEvent(ev);
}

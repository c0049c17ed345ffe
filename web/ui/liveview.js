// The live view drawn: a status document's rows (live.js) in the
// tables, the plot (plot.js), fed by /v1/status/events or, failing that,
// by polling /v1/status.
import * as fmt from "./format.js";
import * as live from "./live.js";
import * as plot from "./plot.js";
import { readEvents } from "./sse.js";

const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};

const plotSpan = 5 * 60 * 1000;
function fillTable(id, rows) {
  const tbody = $(id).querySelector("tbody");
  const head = $(id).querySelectorAll("thead th");
  tbody.replaceChildren(...rows.map((r) => {
    const tr = el("tr", r.busy ? "busy" : "");
    r.cells.forEach((c, i) => tr.append(el("td", head[i] && head[i].classList.contains("num") ? "num" : "", c)));
    return tr;
  }));
}

function showStatus(st) {
  const v = live.view(st, Date.now());
  fillTable("models", v.models);
  fillTable("lanes", v.lanes);
  fillTable("queues", v.queues);
  fillTable("tiers", v.tiers);
  $("lanes").dataset.busy = String(v.busyLanes);
  $("preemptions").textContent = v.preemptions;
  $("hit-rates").textContent = v.hitRates;
  const { top, span } = plot.draw($("plot"), v.samples, plotSpan);
  $("plot-legend").textContent = `blue: generated, grey: prompt; scale 0–${top} tok/s over the last ${fmt.duration(span)}`;
}

// follow reads /v1/status/events while the view is shown, and polls
// /v1/status when the stream is not there or fails.
export async function follow(client, signal) {
  while (!signal.aborted) {
    try {
      const resp = await client.fetch("/v1/status/events", { headers: { Accept: "text/event-stream" }, signal });
      if (resp.ok && (resp.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
        $("live-source").textContent = "live: /v1/status/events";
        await readEvents(resp, (ev) => {
          try {
            const v = JSON.parse(ev.data);
            if (live.isStatus(v)) showStatus(v);
          } catch {
            // an event that is no status document: not for this view
          }
        });
      } else {
        $("live-source").textContent = `polling /v1/status (events: ${resp.status})`;
        await poll(client, signal);
      }
    } catch (e) {
      if (signal.aborted) return;
      $("live-source").textContent = `status: ${e.message || e}; retrying`;
    }
    await sleep(1000, signal);
  }
}

async function poll(client, signal) {
  while (!signal.aborted) {
    const resp = await client.fetch("/v1/status", { signal });
    if (!resp.ok) throw new Error(`/v1/status: ${resp.status}`);
    showStatus(await resp.json());
    await sleep(1000, signal);
  }
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    }, { once: true });
  });
}

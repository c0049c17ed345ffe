// The live view's rows from one /v1/status document (the status package's
// JSON), as pure functions: app.js puts them in the tables.
import * as fmt from "./format.js";

// laneTokens is what a lane has done so far: tokens generated, or while
// it prefills, how much of its prompt is in.
function laneTokens(l) {
  if (l.phase === "prefill" || l.phase === "restore") return `${l.prefilled_tokens ?? 0}/${l.prompt_tokens ?? 0} in`;
  return String(l.generated_tokens ?? 0);
}

// view turns a status document into the tables' rows (arrays of cell
// strings) and the figures around them. now (ms since the epoch) dates
// the keep-alive expiries.
export function view(st, now) {
  const models = (st.models || []).map((m) => ({
    cells: [m.name, fmt.bytes(m.size_bytes), String(m.context ?? "–"),
      m.kind === "embedding" ? "embedding" : `${m.lanes_busy ?? 0}/${m.lanes ?? 0}`,
      m.pinned ? "never (resident)" : fmt.expiry(m.expires_at, now)],
  }));
  const lanes = (st.lanes || []).map((l) => {
    const busy = l.phase && l.phase !== "idle";
    return {
      busy,
      cells: [l.model, String(l.index), busy ? [l.class, l.api && `(${l.api})`].filter(Boolean).join(" ") : "", l.phase || "idle",
        busy ? laneTokens(l) : "", busy && l.tokens_per_s ? fmt.rate(l.tokens_per_s) : ""],
    };
  });
  const queues = (st.queues || []).map((q) => ({
    busy: q.waiting > 0,
    cells: [q.class, String(q.waiting ?? 0), q.waiting > 0 ? fmt.duration(q.oldest_wait_ms) : ""],
  }));
  const tiers = [];
  const hitRates = [];
  for (const m of st.models || []) {
    const c = m.cache;
    if (!c) continue;
    for (const tier of ["resident", "host", "parked"]) {
      const t = c[tier] || {};
      tiers.push({ cells: [m.name, tier, String(t.entries ?? 0), String(t.tokens ?? 0), fmt.bytes(t.bytes ?? 0), String(t.hits ?? 0)] });
    }
    const asked = (c.hits ?? 0) + (c.misses ?? 0);
    hitRates.push(`${m.name}: ${asked ? fmt.percent(c.hit_rate) : "–"} of ${asked} admissions warm`);
  }
  const busyLanes = lanes.filter((l) => l.busy).length;
  return {
    models, lanes, queues, tiers,
    busyLanes,
    preemptions: `${st.preemptions ?? 0} preemptions by the models loaded, since each loaded`,
    hitRates: hitRates.join(" · "),
    samples: (st.throughput && st.throughput.samples) || [],
  };
}

// isStatus tells a status document from other JSON an event may carry.
export function isStatus(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v) && "lanes" in v && "models" in v; // null while the server loads
}

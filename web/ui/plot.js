// The tokens/s plot: the geometry as a pure function, the drawing on a
// canvas beside it.

// niceCeil rounds a plot's top up to 1, 2 or 5 times a power of ten, so
// the scale reads easily; at least 1.
export function niceCeil(v) {
  if (!(v > 1)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// minSpan is the narrowest time window plotted (ms), so a server that
// just started does not stretch two samples across the plot.
export const minSpan = 30 * 1000;

// geometry places samples ({at, prompt_tokens_per_s,
// generated_tokens_per_s}, oldest first) on a width×height plot: x by
// time up to the newest, over the last span ms or the samples' own
// length when shorter (at least minSpan); y by rate up to top. It returns
// the window it used.
export function geometry(samples, width, height, maxSpan) {
  const pts = samples.map((s) => ({ t: Date.parse(s.at), p: s.prompt_tokens_per_s || 0, g: s.generated_tokens_per_s || 0 }))
    .filter((s) => Number.isFinite(s.t));
  if (pts.length === 0) return { top: 1, span: minSpan, prompt: [], generated: [] };
  const end = pts[pts.length - 1].t;
  const span = Math.min(maxSpan, Math.max(minSpan, end - pts[0].t));
  const shown = pts.filter((s) => s.t >= end - span);
  const top = niceCeil(Math.max(...shown.map((s) => Math.max(s.p, s.g))));
  const x = (t) => width - ((end - t) / span) * width;
  const y = (v) => height - (v / top) * height;
  return {
    top,
    span,
    prompt: shown.map((s) => [x(s.t), y(s.p)]),
    generated: shown.map((s) => [x(s.t), y(s.g)]),
  };
}

// draw paints the plot of samples on canvas (its CSS size, at the
// device's pixel ratio) and returns the scale's top and time window.
export function draw(canvas, samples, span) {
  const ratio = globalThis.devicePixelRatio || 1;
  const w = canvas.clientWidth || canvas.width;
  const h = canvas.clientHeight || canvas.height;
  if (canvas.width !== Math.round(w * ratio)) canvas.width = Math.round(w * ratio);
  if (canvas.height !== Math.round(h * ratio)) canvas.height = Math.round(h * ratio);
  const g = canvas.getContext("2d");
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, w, h);
  const geo = geometry(samples, w, h - 2, span);
  const style = getComputedStyle(canvas);
  g.strokeStyle = style.getPropertyValue("--line") || "#ccc";
  g.lineWidth = 1;
  for (const f of [0.5, 1]) {
    g.beginPath();
    g.moveTo(0, h - 1 - f * (h - 2));
    g.lineTo(w, h - 1 - f * (h - 2));
    g.stroke();
  }
  const line = (pts, color) => {
    if (pts.length === 0) return;
    g.strokeStyle = color;
    g.lineWidth = 2;
    g.beginPath();
    pts.forEach(([px, py], i) => (i === 0 ? g.moveTo(px, py + 1) : g.lineTo(px, py + 1)));
    g.stroke();
  };
  line(geo.prompt, "#a0aec0");
  line(geo.generated, "#3182ce");
  return { top: geo.top, span: geo.span };
}

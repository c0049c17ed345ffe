// How figures are written on the page: speeds, durations, sizes, shares.

// rate is a speed in tokens per second: one decimal below 100, none above;
// "–" when unknown.
export function rate(tokPerSec) {
  if (!Number.isFinite(tokPerSec) || tokPerSec < 0) return "–";
  return tokPerSec < 100 ? `${tokPerSec.toFixed(1)} tok/s` : `${Math.round(tokPerSec)} tok/s`;
}

// duration is milliseconds as "850 ms" below a second, "1.25 s" below a
// minute, "2m 05s" above.
export function duration(ms) {
  if (!Number.isFinite(ms) || ms < 0) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(2)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
}

// bytes is a size in binary units: "512 B", "1.5 KiB", "3.2 GiB".
export function bytes(n) {
  if (!Number.isFinite(n) || n < 0) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

// percent is a share from 0 to 1 as a whole percentage.
export function percent(share) {
  if (!Number.isFinite(share)) return "–";
  return `${Math.round(Math.min(1, Math.max(0, share)) * 100)}%`;
}

// statsLine is the line under a reply (stats from chat.js).
export function statsLine(st) {
  const parts = [];
  if (st.tokens !== null) parts.push(`${st.tokens} tokens`);
  if (st.tokPerSec !== null) parts.push(rate(st.tokPerSec));
  if (st.ttftMs !== null) parts.push(`first token ${duration(st.ttftMs)}`);
  if (st.cachedShare !== null) parts.push(`prompt ${st.promptTokens} tokens, ${percent(st.cachedShare)} cached`);
  return parts.join(" · ");
}

// expiry is how long until a model is unloaded for idleness.
export function expiry(expiresAt, now) {
  if (!expiresAt) return "never";
  const t = Date.parse(expiresAt);
  if (!Number.isFinite(t) || t - now > 1e11) return "never"; // Ollama's "for ever" is far away
  return t <= now ? "now" : `in ${duration(t - now)}`;
}

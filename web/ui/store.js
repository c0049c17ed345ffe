// Conversations kept in the browser (localStorage): a list of
// {id, title, model, messages, updated}, newest first.

export const conversationsName = "superfluid.conversations";
export const settingsName = "superfluid.settings";

// mostKept bounds the list: the oldest beyond it are dropped on save.
export const mostKept = 100;

export function loadConversations(storage) {
  try {
    const v = JSON.parse(storage.getItem(conversationsName) || "[]");
    if (!Array.isArray(v)) return [];
    const list = v.filter((c) => c && typeof c.id === "string" && Array.isArray(c.messages));
    for (const c of list) for (const m of c.messages) endInterrupted(m);
    return list;
  } catch {
    return [];
  }
}

// saveConversations keeps the newest mostKept; when the browser's quota
// refuses them, it drops the oldest until they fit. It reports whether
// everything was kept.
// endInterrupted marks a reply the page was closed during as stopped:
// it will never stream again.
function endInterrupted(m) {
  if (m && m.role === "assistant" && m.t && m.t.end === null) {
    m.t.end = m.t.first ?? m.t.start;
    m.finish = m.finish || "stopped";
  }
}

export function saveConversations(storage, list) {
  let keep = [...list].sort((a, b) => b.updated - a.updated).slice(0, mostKept);
  for (;;) {
    try {
      storage.setItem(conversationsName, JSON.stringify(keep));
      return keep.length === list.length;
    } catch {
      if (keep.length <= 1) return false;
      keep = keep.slice(0, Math.ceil(keep.length / 2));
    }
  }
}

export function loadSettings(storage) {
  try {
    const v = JSON.parse(storage.getItem(settingsName) || "{}");
    return v && typeof v === "object" ? v : {};
  } catch {
    return {};
  }
}

export function saveSettings(storage, s) {
  try {
    storage.setItem(settingsName, JSON.stringify(s));
  } catch {
    // settings are a convenience: losing them loses nothing else
  }
}

// newID names a conversation.
export function newID(now, random) {
  return `${now.toString(36)}-${Math.floor(random * 1e9).toString(36)}`;
}

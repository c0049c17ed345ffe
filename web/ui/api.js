// Requests to this server with the API key the user gave, if any: a
// request answered 401 asks for the key (askKey) and is sent once more
// with it. The key stays in localStorage under keyName.

export const keyName = "superfluid.apiKey";

export class Client {
  // storage is localStorage (or a stand-in); askKey returns a promise of
  // the key the user typed, or "" when they declined; fetchFn is fetch.
  constructor(storage, askKey, fetchFn) {
    this.storage = storage;
    this.askKey = askKey;
    this.fetchFn = fetchFn;
  }

  key() {
    try {
      return this.storage.getItem(keyName) || "";
    } catch {
      return "";
    }
  }

  withKey(init) {
    const headers = new Headers(init.headers || {});
    const key = this.key();
    if (key !== "") headers.set("Authorization", `Bearer ${key}`);
    return { ...init, headers };
  }

  // fetch is fetch(path, init) with the key; on 401 it asks for a key and
  // tries once more. The body must be a string (sent twice).
  async fetch(path, init = {}) {
    const resp = await this.fetchFn(path, this.withKey(init));
    if (resp.status !== 401) return resp;
    const key = await this.askKey();
    if (!key) return resp;
    try {
      this.storage.setItem(keyName, key);
    } catch {
      // storage full or refused: the key still serves this request
    }
    return this.fetchFn(path, this.withKey(init));
  }

  async json(path, init = {}) {
    const resp = await this.fetch(path, init);
    const body = await resp.json().catch(() => null);
    if (!resp.ok) {
      const msg = body && body.error ? (typeof body.error === "string" ? body.error : body.error.message) : resp.statusText;
      const err = new Error(`${path}: ${resp.status} ${msg}`);
      err.status = resp.status;
      throw err;
    }
    return body;
  }
}

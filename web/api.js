// The API client: the one place the UI talks HTTP to lab (docs/api.md).

export const enc = encodeURIComponent;

const KEY = "lab.deviceKey";

/**
 * This device's key, given at login and kept in this origin's storage: lab wants it with
 * every API request (the session cookie alone, which browsers send to every port of a
 * host, opens only the UI's files). Empty without a token (nothing to send).
 */
export function deviceKey() {
  try { return localStorage.getItem(KEY) || ""; } catch { return ""; }
}

/** The key where the service worker finds it (its answer from a notification). */
export function shareDeviceKey() {
  const k = deviceKey();
  if (!k || !globalThis.caches) return;
  caches.open("lab-device").then((c) => c.put("/device-key", new Response(k))).catch(() => {});
}

/** Call the API. Never throws: returns {ok, status, data} or {ok:false, status, data, error, message}. */
export async function api(method, path, body) {
  let res;
  try {
    const headers = body === undefined ? { accept: "application/json" } : { accept: "application/json", "content-type": "application/json" };
    const key = deviceKey();
    if (key) headers["x-lab-device-key"] = key;
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (e) {
    return { ok: false, status: 0, error: "network", message: `Cannot reach lab: ${e.message}` };
  }
  // A session that ended (logged out, token rotated) or a key this page lacks: the login page.
  if (res.status === 401) { location.assign("login"); return { ok: false, status: 401, error: "unauthorized", message: "Log in again." }; }
  const text = await res.text().catch(() => "");
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (res.ok) return { ok: true, status: res.status, data };
  return {
    ok: false,
    status: res.status,
    data, // an error's own fields (a merge conflict's files)
    error: (data && data.error) || `http_${res.status}`,
    message: (data && data.message) || text.trim().slice(0, 300) || `HTTP ${res.status} ${res.statusText}`,
  };
}

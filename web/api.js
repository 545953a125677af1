// The API client: the one place the UI talks HTTP to lab (docs/api.md).

export const enc = encodeURIComponent;

/** Call the API. Never throws: returns {ok, status, data} or {ok:false, status, data, error, message}. */
export async function api(method, path, body) {
  let res;
  try {
    res = await fetch(path, {
      method,
      headers: body === undefined ? { accept: "application/json" } : { accept: "application/json", "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (e) {
    return { ok: false, status: 0, error: "network", message: `Cannot reach lab: ${e.message}` };
  }
  // A session that ended (token rotated, lab restarted): back to the login page.
  if (res.status === 401) { location.reload(); return { ok: false, status: 401, error: "unauthorized", message: "Log in again." }; }
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

// A live view over server-sent events: a run's (GET /runs/{id}/events, events named
// "view") or the run list's (GET /runs/events, "runs").

import { deviceKey } from "./api.js";

/**
 * EventSource wrapper. The browser reconnects by itself (sending Last-Event-ID);
 * if the source gets CLOSED (HTTP error), we reopen it with backoff. `url` may be a
 * function: it is asked again on each reopen (to start after what the page has).
 */
export class ViewStream {
  constructor(url, { onView, onStatus, onClosed, event = "view" }) {
    this.url = url;
    this.event = event;
    this.onView = onView;
    this.onStatus = onStatus;
    this.onClosed = onClosed;
    this.backoff = 1000;
    this.timer = null;
    this.stopped = false;
    this.open();
  }

  open() {
    if (this.stopped) return;
    this.onStatus("connecting");
    let url = typeof this.url === "function" ? this.url() : this.url;
    // An EventSource sends no headers: the device key goes in the query (this route only).
    const key = deviceKey();
    if (key) url += `${url.includes("?") ? "&" : "?"}device_key=${encodeURIComponent(key)}`;
    const es = new EventSource(url);
    this.es = es;
    es.addEventListener("open", () => { this.onStatus("live"); });
    es.addEventListener(this.event, (e) => {
      this.backoff = 1000;
      this.onStatus("live");
      let data;
      try { data = JSON.parse(e.data); } catch { return; }
      this.onView(data);
    });
    es.addEventListener("error", () => {
      if (this.stopped) return;
      if (es.readyState === EventSource.CLOSED) {
        this.onStatus("offline");
        clearTimeout(this.timer);
        this.timer = setTimeout(async () => {
          if (this.stopped) return;
          const keepGoing = this.onClosed ? await this.onClosed() : true;
          if (keepGoing) this.open();
        }, this.backoff);
        this.backoff = Math.min(this.backoff * 2, 15000);
      } else {
        this.onStatus("reconnecting");
      }
    });
  }

  close() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.es) this.es.close();
  }
}

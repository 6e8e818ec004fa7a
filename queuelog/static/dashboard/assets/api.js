// The dashboard's only way to the server: GraphQL over HTTP at /graphql with the API key in
// the Authorization header, and one graphql-transport-ws socket for subscriptions with the
// key in connection_init, reconnecting by itself.

const ENDPOINT = "/graphql";

/** An error answered by the API: its message and its code (extensions.code or a userError's). */
export class ApiError extends Error {
  constructor(message, code) {
    super(message);
    this.code = code || "ERROR";
  }
  toString() {
    return `${this.message} (${this.code})`;
  }
}

/** HTTP client for one key. `onRefused` runs when the server no longer takes the key. */
export class Api {
  constructor(key, onRefused) {
    this.key = key;
    this.onRefused = onRefused;
  }

  /** The operation's data; throws ApiError with the first error's message and code. */
  async query(document, variables = {}) {
    let response;
    try {
      response = await fetch(ENDPOINT, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json",
          authorization: `Bearer ${this.key}`,
        },
        body: JSON.stringify({query: document, variables}),
      });
    } catch {
      throw new ApiError("The server could not be reached.", "NETWORK");
    }
    let body;
    try {
      body = await response.json();
    } catch {
      throw new ApiError(`The server answered HTTP ${response.status}.`, `HTTP_${response.status}`);
    }
    const error = body.errors && body.errors[0];
    if (error) {
      const code = (error.extensions && error.extensions.code) || "ERROR";
      if (code === "UNAUTHENTICATED" && this.onRefused) this.onRefused(error.message);
      throw new ApiError(error.message, code);
    }
    return body.data;
  }

  /** A mutation's payload (its only root field); its first userError is thrown as ApiError. */
  async mutate(document, variables = {}) {
    const data = await this.query(document, variables);
    const payload = Object.values(data)[0];
    const problem = payload && payload.userErrors && payload.userErrors[0];
    if (problem) throw new ApiError(problem.message, problem.code);
    return payload;
  }
}

/** The close codes after which reconnecting with the same key cannot help. */
const REFUSED = new Set([4401, 4403]);

/**
 * One graphql-transport-ws connection carrying every subscription of the page. It opens
 * with the first subscription, re-subscribes everything after a dropped connection (each
 * subscription's `variables()` is asked again, so it may pass `after`), and then calls each
 * one's `resync()` so the view can read what it may have missed.
 */
export class Socket {
  constructor(key, {onRefused, onState} = {}) {
    this.key = key;
    this.onRefused = onRefused;
    this.onState = onState || (() => {});
    this.subs = new Map();
    this.nextId = 1;
    this.ws = null;
    this.acked = false;
    this.closed = false;
    this.everAcked = false;
    this.retry = 0;
    this.timer = null;
  }

  url() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    return `${scheme}//${location.host}${ENDPOINT}`;
  }

  /**
   * Subscribe: `sub` has query, variables() and next(data); optional error(ApiError),
   * complete() (for streams that end) and resync(). Returns the function that ends it.
   */
  subscribe(sub) {
    const id = String(this.nextId++);
    this.subs.set(id, sub);
    if (this.acked) this.send({id, type: "subscribe", payload: this.payload(sub)});
    else this.connect();
    return () => {
      if (this.subs.delete(id) && this.acked) this.send({id, type: "complete"});
    };
  }

  payload(sub) {
    return {query: sub.query, variables: sub.variables ? sub.variables() : {}};
  }

  send(message) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(message));
  }

  connect() {
    if (this.closed || this.ws || this.timer) return;
    const ws = new WebSocket(this.url(), "graphql-transport-ws");
    this.ws = ws;
    this.onState("connecting");
    ws.addEventListener("open", () => {
      ws.send(JSON.stringify({
        type: "connection_init",
        payload: {authorization: `Bearer ${this.key}`},
      }));
    });
    ws.addEventListener("message", (event) => this.receive(JSON.parse(event.data)));
    ws.addEventListener("close", (event) => this.dropped(ws, event));
  }

  receive(message) {
    const sub = this.subs.get(message.id);
    switch (message.type) {
      case "connection_ack": {
        const again = this.everAcked;
        this.acked = this.everAcked = true;
        this.retry = 0;
        this.onState("live");
        for (const [id, s] of this.subs) this.send({id, type: "subscribe", payload: this.payload(s)});
        if (again) for (const s of this.subs.values()) if (s.resync) s.resync();
        break;
      }
      case "ping":
        this.send({type: "pong"});
        break;
      case "next": {
        const {data, errors} = message.payload || {};
        if (sub && errors && errors.length && !data) this.failed(message.id, sub, errors);
        else if (sub) sub.next(data);
        break;
      }
      case "error":
        if (sub) this.failed(message.id, sub, message.payload);
        break;
      case "complete":
        // A stream that ends on its own says so with complete(); one that cannot end (a
        // server shutting down ended it) stays registered for the next connection.
        if (sub && sub.complete) {
          this.subs.delete(message.id);
          sub.complete();
        }
        break;
      default:
        break;
    }
  }

  /**
   * A stream answered errors. NOT_FOUND is one event whose job the key can no longer read
   * (the stream goes on); anything else ends the stream, and a refused key signs out.
   */
  failed(id, sub, errors) {
    const first = (errors && errors[0]) || {};
    const code = (first.extensions && first.extensions.code) || "ERROR";
    if (code === "NOT_FOUND") return;
    this.subs.delete(id);
    const error = new ApiError(first.message || "the subscription was refused", code);
    if (code === "UNAUTHENTICATED" && this.onRefused) this.onRefused(error.message);
    else if (sub.error) sub.error(error);
  }

  dropped(ws, event) {
    if (this.ws !== ws) return;
    this.ws = null;
    this.acked = false;
    if (this.closed) return;
    if (REFUSED.has(event.code)) {
      this.onState("refused");
      if (this.onRefused) this.onRefused(event.reason || "the key was refused");
      return;
    }
    this.onState("reconnecting");
    const delay = Math.min(10_000, 500 * 2 ** this.retry++) * (0.5 + Math.random() / 2);
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.subs.size) this.connect();
    }, delay);
  }

  /** Close for good (sign out): no reconnect, every subscription forgotten. */
  close() {
    this.closed = true;
    this.subs.clear();
    clearTimeout(this.timer);
    if (this.ws) this.ws.close(1000, "signed out");
    this.ws = null;
  }
}

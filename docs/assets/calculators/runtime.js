// The page's handle on the tab's Python worker: started lazily, shared by every calculator,
// and replaced (with the reader told) if it crashes or stops answering.
// Emits "state" events: loading | ready | failed | restarted.
const BOOT_TIMEOUT_MS = 60000;
const CALL_TIMEOUT_MS = 15000;

function absolute(urls) {
  return Object.fromEntries(Object.entries(urls).map(([k, v]) => [k, new URL(v, document.baseURI).href]));
}

export class Runtime extends EventTarget {
  constructor(urls) {
    super();
    this.urls = absolute(urls);
    this.worker = null;
    this.booting = null;
    this.pending = new Map();
    this.seq = 0;
    this.state = "idle";
    this.callTimeoutMs = CALL_TIMEOUT_MS;   // tests shorten this to exercise the hung-worker path
  }

  setState(state, detail = {}) {
    this.state = state;
    this.dispatchEvent(new CustomEvent("state", { detail: { state, ...detail } }));
  }

  start() {
    this.booting = this.booting || this.spawn();
    return this.booting;
  }

  async spawn() {
    this.setState("loading");
    this.worker = new Worker(this.urls.worker, { type: "module" });
    this.worker.onmessage = (event) => this.reply(event.data);
    this.worker.onerror = (event) => {
      event.preventDefault();
      this.restart("The Python worker crashed");
    };
    try {
      const { pyodide, wheel, snapshot } = this.urls;
      await this.post({ op: "boot", pyodide, wheel, snapshot }, BOOT_TIMEOUT_MS);
      this.setState("ready");
    } catch (err) {
      this.teardown(err.message);
      this.booting = null;
      this.setState("failed", { message: err.message });
      throw err;
    }
  }

  async call(message) {
    await this.start();
    return this.post(message, this.callTimeoutMs);
  }

  post(message, timeoutMs) {
    const id = ++this.seq;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.restart("The Python worker stopped responding"), timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.worker.postMessage({ ...message, id });
    });
  }

  reply({ id, ok, value, message }) {
    const waiting = this.pending.get(id);
    if (!waiting) return;
    clearTimeout(waiting.timer);
    this.pending.delete(id);
    if (ok) waiting.resolve(value);
    else waiting.reject(new Error(message));
  }

  restart(reason) {
    const wasReady = this.state === "ready";
    this.teardown(reason);
    this.booting = null;
    if (wasReady) this.setState("restarted", { message: reason });
    else this.setState("failed", { message: reason });
  }

  teardown(reason) {
    if (this.worker) this.worker.terminate();
    this.worker = null;
    for (const waiting of this.pending.values()) {
      clearTimeout(waiting.timer);
      const err = new Error(reason);
      err.lost = true;
      waiting.reject(err);
    }
    this.pending.clear();
  }
}

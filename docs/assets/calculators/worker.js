// The tab's one Python runtime, both ends of it: `Runtime` is the page's handle on the worker
// (started lazily, shared by every calculator, replaced with the reader told if it crashes or
// stops answering); the rest runs only when this module is the worker: Pyodide and the core.
// Messages (JSON-safe both ways):
//   page → worker  {id, op: "boot", pyodide, wheel, snapshot}   absolute URLs
//                  {id, op: "present", name, inputs}     → value: JSON string from calculators.page
//                  {id, op: "describe", kind, value}     → value: JSON string (a definition, checked)
//   worker → page  {id, ok: true, value} | {id, ok: false, message}
const BOOT_TIMEOUT_MS = 60000;
const CALL_TIMEOUT_MS = 15000;

const absolute = (urls) =>
  Object.fromEntries(Object.entries(urls).map(([k, v]) => [k, new URL(v, document.baseURI).href]));

// Emits "state" events: loading | ready | failed | restarted.
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
    this.worker.onerror = (event) => { event.preventDefault(); this.restart("The Python worker crashed"); };
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

  // A calculator's present() result for these inputs (an {error} when an input is wrong).
  async present(name, inputs) {
    const units = document.documentElement.dataset.rsUnits;   // memory sizes in GiB or GB: the reader's setting
    return JSON.parse(await this.call({ op: "present", name, inputs, units }));
  }

  // A model or accelerator definition, checked by Python; throws naming the field when it is wrong.
  async describe(kind, value) {
    const reply = JSON.parse(await this.call({ op: "describe", kind, value }));
    if (reply.error) throw new Error(`${reply.error.field}: ${reply.error.message}`);
    // what it reads as in units (an accelerator's), not enumerable: never stored or exported (reader walk #27)
    return Object.defineProperty(reply.definition, "reads", { value: reply.reads });
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
    this.setState(wasReady ? "restarted" : "failed", { message: reason });
  }

  teardown(reason) {
    this.worker?.terminate();
    this.worker = null;
    for (const waiting of this.pending.values()) {
      clearTimeout(waiting.timer);
      waiting.reject(Object.assign(new Error(reason), { lost: true }));
    }
    this.pending.clear();
  }
}

// ---- inside the worker ----------------------------------------------------------------------
// Python starts from a memory snapshot made at build time (hooks/snapshot.mjs): the core is
// already imported and warm, so start-up skips Python's own (seconds in WebAssembly). If the
// snapshot cannot be used, it starts the plain way and loads the core's wheel.
let booted = null;
const py = {};
const marks = {};   // boot phases in ms since the worker started, for `make bench` and tests
const mark = (name) => { marks[name] = Math.round(performance.now()); };
const messageOf = (err) => String(err?.message || err);

async function inflate(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${response.status} ${url}`);
  return new Response(response.body.pipeThrough(new DecompressionStream("gzip"))).arrayBuffer();
}

// The core's two entry points, from either start; throws if this Python lacks them.
function entryPoints(pyodide) {
  pyodide.runPython("from calculators.page import present_json, describe_json");
  return { present: pyodide.globals.get("present_json"), describe: pyodide.globals.get("describe_json"), pyodide };
}

// Pyodide 314.0.7 sets INITIAL_MEMORY to the snapshot's size but never reads it: grow the heap before a restore.
function sized(createPyodideModule, bytes) {
  return (settings) => {
    const instantiate = settings.instantiateWasm;
    settings.instantiateWasm = (imports, receive) => instantiate(imports, (instance, module) => {
      const short = bytes - instance.exports.memory.buffer.byteLength;
      if (short > 0) instance.exports.memory.grow(Math.ceil(short / 65536));
      receive(instance, module);
    });
    return createPyodideModule(settings);
  };
}

async function start(loadPyodide, options, wheel, snapshot) {
  if (snapshot) {
    try {
      const heap = await snapshot, create = sized(options.createPyodideModule, heap.byteLength);
      const found = entryPoints(await loadPyodide({ ...options, createPyodideModule: create, _loadSnapshot: heap }));
      marks.via = "snapshot";
      return found;
    } catch (err) {
      marks.snapshotError = messageOf(err);
    }
  }
  const pyodide = await loadPyodide(options);
  await pyodide.loadPackage(wheel, { messageCallback: () => {} });
  marks.via = "wheel";
  return entryPoints(pyodide);
}

async function boot(pyodideDir, wheel, snapshotUrl) {
  mark("start");
  // The snapshot downloads and inflates while the runtime's modules load.
  const snapshot = snapshotUrl && self.DecompressionStream ? inflate(snapshotUrl) : null;
  snapshot?.catch(() => {});   // a failed download is handled in start(), not reported as unhandled
  // The runtime ships under .js names so servers that don't know .mjs can still serve it.
  const [{ loadPyodide }, { default: createPyodideModule }] = await Promise.all([
    import(pyodideDir + "pyodide-loader.js"), import(pyodideDir + "pyodide-asm.js")]);
  mark("modules");
  const options = { indexURL: pyodideDir, createPyodideModule, stdout: () => {}, stderr: () => {} };
  const { present, describe, pyodide } = await start(loadPyodide, options, wheel, snapshot);
  mark("ready");
  Object.assign(py, { present, describe });
  // For `make bench` and tests: the WebAssembly heap, where Python's objects live, and the marks.
  self.llmsi = { wasmHeapBytes: () => pyodide._module.HEAP8.buffer.byteLength, bootMarks: () => marks };
}

async function handle(data) {
  if (data.op === "boot") {
    booted = booted || boot(data.pyodide, data.wheel, data.snapshot);
    await booted;
    return "ready";
  }
  if (!booted) throw new Error("not booted");
  await booted;
  if (data.op === "present") return py.present(data.name, JSON.stringify(data.inputs), data.units || "binary");
  if (data.op === "describe") return py.describe(data.kind, JSON.stringify(data.value));
  throw new Error(`unknown op ${data.op}`);
}

if (typeof WorkerGlobalScope !== "undefined" && self instanceof WorkerGlobalScope) {
  self.onmessage = async ({ data }) => {
    try {
      self.postMessage({ id: data.id, ok: true, value: await handle(data) });
    } catch (err) {
      self.postMessage({ id: data.id, ok: false, message: messageOf(err) });
    }
  };
}

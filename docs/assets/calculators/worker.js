// The tab's one Python runtime: Pyodide in a module worker running the numeric core.
// Messages (JSON-safe both ways):
//   page → worker  {id, op: "boot", pyodide, wheel, snapshot}   absolute URLs
//                  {id, op: "present", name, inputs}     → value: JSON string from calculators.page
//                  {id, op: "describe", kind, value}     → value: JSON string (a definition, checked)
//   worker → page  {id, ok: true, value} | {id, ok: false, message}
//
// Python starts from a memory snapshot made at build time (hooks/snapshot.mjs): the core is
// already imported and warm, so start-up skips Python's own (seconds in WebAssembly). If the
// snapshot cannot be used, it starts the plain way and loads the core's wheel.
let booted = null;
const py = {};

const marks = {};   // boot phases in ms since the worker started, for `make bench` and tests
const mark = (name) => { marks[name] = Math.round(performance.now()); };

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

async function start(loadPyodide, options, wheel, snapshot) {
  if (snapshot) {
    try {
      const found = entryPoints(await loadPyodide({ ...options, _loadSnapshot: snapshot }));
      marks.via = "snapshot";
      return found;
    } catch (err) {
      marks.snapshotError = String((err && err.message) || err);
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
  // For `make bench`: the WebAssembly heap, where Python's objects live.
  self.wasmHeapBytes = () => pyodide._module.HEAP8.buffer.byteLength;
  self.bootMarks = () => marks;
}

async function handle(data) {
  if (data.op === "boot") {
    booted = booted || boot(data.pyodide, data.wheel, data.snapshot);
    await booted;
    return "ready";
  }
  if (!booted) throw new Error("not booted");
  await booted;
  if (data.op === "present") return py.present(data.name, JSON.stringify(data.inputs));
  if (data.op === "describe") return py.describe(data.kind, JSON.stringify(data.value));
  throw new Error(`unknown op ${data.op}`);
}

self.onmessage = async ({ data }) => {
  try {
    self.postMessage({ id: data.id, ok: true, value: await handle(data) });
  } catch (err) {
    self.postMessage({ id: data.id, ok: false, message: String((err && err.message) || err) });
  }
};

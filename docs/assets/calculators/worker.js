// The tab's one Python runtime: Pyodide in a module worker running the calculators wheel.
// Messages (JSON-safe both ways):
//   page → worker  {id, op: "boot", pyodide, wheel}      absolute URLs
//                  {id, op: "present", name, inputs}     → value: JSON string from calculators.page
//                  {id, op: "describe", kind, value}     → value: JSON string (a definition, checked)
//   worker → page  {id, ok: true, value} | {id, ok: false, message}
let booted = null;
const py = {};

const marks = {};   // boot phases in ms since the worker started, for `make bench`
const mark = (name) => { marks[name] = Math.round(performance.now()); };

async function boot(pyodideDir, wheel) {
  // The runtime ships under .js names so servers that don't know .mjs can still serve it.
  mark("start");
  const { loadPyodide } = await import(pyodideDir + "pyodide-loader.js");
  const { default: createPyodideModule } = await import(pyodideDir + "pyodide-asm.js");
  mark("modules");
  const pyodide = await loadPyodide({
    indexURL: pyodideDir, createPyodideModule, stdout: () => {}, stderr: () => {},
  });
  mark("python");
  await pyodide.loadPackage(wheel, { messageCallback: () => {} });
  mark("wheel");
  pyodide.runPython("from calculators.page import present_json, describe_json");
  mark("imported");
  py.present = pyodide.globals.get("present_json");
  py.describe = pyodide.globals.get("describe_json");
  // For `make bench`: the WebAssembly heap, where Python's objects live.
  self.wasmHeapBytes = () => pyodide._module.HEAP8.buffer.byteLength;
  self.bootMarks = () => marks;
}

async function handle(data) {
  if (data.op === "boot") {
    booted = booted || boot(data.pyodide, data.wheel);
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

// Runs the browser's entries (calculators.present_json, describe_json: what the worker calls) in
// Pyodide (from node_modules) for every parity case and prints one JSON array of result strings on
// the last line of stdout.
// Usage: node tests/core/pyodide_parity.mjs <absolute wheel path | snapshot .gz path> <cases.json>
// A wheel is loaded into a plain start; a .gz is the site's memory snapshot, restored as the
// browser's worker restores it (the core already imported).
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";

const here = dirname(fileURLToPath(import.meta.url));
const pyodideDir = resolve(here, "../../node_modules/pyodide");
const { loadPyodide } = await import(resolve(pyodideDir, "pyodide.mjs"));

const [core, casesPath] = process.argv.slice(2);

// As the site's worker does (docs/assets/calculators/worker.js `sized`): Pyodide 314.0.7 no longer reads the
// INITIAL_MEMORY it sets for a snapshot, so the memory is grown to the snapshot's size before the restore.
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
const quiet = () => {};
const options = { indexURL: pyodideDir + "/", stdout: quiet, stderr: quiet };
let pyodide;
if (core.endsWith(".gz")) {
  const heap = gunzipSync(readFileSync(core));
  const { default: createPyodideModule } = await import(resolve(pyodideDir, "pyodide.asm.mjs"));
  pyodide = await loadPyodide({ ...options, createPyodideModule: sized(createPyodideModule, heap.length), _loadSnapshot: heap });
} else {
  pyodide = await loadPyodide(options);
  await pyodide.loadPackage(core, { messageCallback: quiet, errorCallback: (m) => console.error(m) });
}
pyodide.globals.set("cases_json", readFileSync(casesPath, "utf8"));
const out = pyodide.runPython(`
import json
from calculators import describe_json, present_json
entry = {"present": present_json, "describe": describe_json}
json.dumps([entry[op](name, text) for op, name, text in json.loads(cases_json)])
`);
// A restored snapshot still imports what it never imported before, from the same stdlib zip.
pyodide.runPython("import difflib; assert difflib.SequenceMatcher(None, 'abc', 'abd').ratio() > 0.6");
process.stdout.write(out + "\n");

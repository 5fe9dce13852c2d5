// Runs calculators.run_json in Pyodide (from node_modules) for every parity case and prints
// one JSON array of result strings on the last line of stdout.
// Usage: node tests/core/pyodide_parity.mjs <absolute wheel path> <cases.json>
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const pyodideDir = resolve(here, "../../node_modules/pyodide");
const { loadPyodide } = await import(resolve(pyodideDir, "pyodide.mjs"));

const [wheel, casesPath] = process.argv.slice(2);
const quiet = () => {};
const pyodide = await loadPyodide({ indexURL: pyodideDir + "/", stdout: quiet, stderr: quiet });
await pyodide.loadPackage(wheel, { messageCallback: quiet, errorCallback: (m) => console.error(m) });
pyodide.globals.set("cases_json", readFileSync(casesPath, "utf8"));
const out = pyodide.runPython(`
import json
import calculators
json.dumps([calculators.run_json(name, inputs) for name, inputs in json.loads(cases_json)])
`);
process.stdout.write(out + "\n");

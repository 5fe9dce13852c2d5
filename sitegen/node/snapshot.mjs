// Makes the memory snapshot the browser's worker starts from: Pyodide with the core imported,
// every data file read and every calculator run once, gzip-compressed.
// Usage: node sitegen/node/snapshot.mjs <wheel path> <output .gz path>
//
// Why: a plain start runs Python's start-up and compiles the stdlib's and the core's sources
// in WebAssembly (4.5 s on the 2-core build machine); restoring this heap takes about 0.5 s.
// `_makeSnapshot`/`_loadSnapshot` are Pyodide's underscored options (314.0.7 is pinned, and
// the worker falls back to a plain start if a restore fails). The wheel is unpacked by
// Python's zipfile, not loadPackage: the loader keeps JavaScript handles a snapshot refuses.
import { readFileSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { loadPyodide } from "pyodide";

const [wheel, output] = process.argv.slice(2);
const quiet = () => {};
const pyodide = await loadPyodide({ _makeSnapshot: true, stdout: quiet, stderr: (line) => console.error(line) });
pyodide.FS.writeFile("/tmp/core.whl", readFileSync(wheel));
try {
  pyodide.runPython(`
import sysconfig, zipfile
zipfile.ZipFile("/tmp/core.whl").extractall(sysconfig.get_path("purelib"))
from calculators.page import warm_up
warm_up()
`);
  writeFileSync(output, gzipSync(pyodide.makeMemorySnapshot(), { level: 9 }));
} catch (err) {   // one readable message, not Node's dump of the minified runtime
  console.error(String(err.message || err));
  process.exit(1);
}

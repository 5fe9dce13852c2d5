// Renders TeX to MathML with KaTeX (browsers draw MathML Core natively: no CSS, no fonts), one JSON request per line on stdin, one reply per line.
// Started by sitegen/katex.py and kept alive for a whole build, so Node starts once. Request: {"tex": "...", "display": bool}
import { createInterface } from "node:readline";
import katex from "katex";

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const { tex, display } = JSON.parse(line);
  try {
    const html = katex.renderToString(tex, { displayMode: display, output: "mathml", throwOnError: true });
    process.stdout.write(JSON.stringify({ html }) + "\n");
  } catch (err) {
    process.stdout.write(JSON.stringify({ error: String(err.message || err) }) + "\n");
  }
}

// Reads JSON lines from stdin, each {"id": any, "latex": string} (or a bare JSON string), renders each
// with KaTeX as st.latex does (display mode) with throwOnError, and writes one JSON line per failure:
// {"id": ..., "latex": ..., "error": message}. The last line is {"checked": N, "errors": M}.
// Exit status: 0 when every string rendered, 1 when some failed, 2 on unreadable input.
"use strict";
const katex = require("katex");

function check(latex) {
  try {
    katex.renderToString(latex, { displayMode: true, throwOnError: true });
    return null;
  } catch (err) {
    return String(err && err.message ? err.message : err);
  }
}

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  let checked = 0;
  let errors = 0;
  const lines = input.split("\n").filter((line) => line.trim() !== "");
  for (const [index, line] of lines.entries()) {
    let item;
    try {
      item = JSON.parse(line);
    } catch (err) {
      process.stdout.write(JSON.stringify({ id: index, error: "not JSON: " + err.message }) + "\n");
      process.exitCode = 2;
      return;
    }
    const latex = typeof item === "string" ? item : item.latex;
    const id = typeof item === "string" ? index : item.id;
    checked += 1;
    const error = typeof latex === "string" ? check(latex) : "not a string";
    if (error !== null) {
      errors += 1;
      process.stdout.write(JSON.stringify({ id, latex, error }) + "\n");
    }
  }
  process.stdout.write(JSON.stringify({ checked, errors, katex: katex.version }) + "\n");
  process.exitCode = errors ? 1 : 0;
});

// ESLint for the project's own JavaScript: the recommended rules, nothing more.
// The browser code is ES2022 modules (the worker included); hooks/*.mjs and the parity test run in Node.
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["site/", "node_modules/", ".venv/", "build/"] },
  js.configs.recommended,
  {
    files: ["docs/assets/**/*.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: { ...globals.browser, ...globals.worker } },
  },
  {
    files: ["**/*.mjs"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: globals.node },
  },
];

// A JSON value as a folded tree: a <details> per object or array, the first level open.
//
// Keys and values reach the page as text nodes only. A closed node builds its children
// the first time it opens, so a large payload costs one level until it is explored, and
// a container shows at most MAX_MEMBERS members. Each <details> carries its path
// (`$`, `$["a"][0]`) so that a re-render can keep what the operator opened or closed.

import { h } from "./dom.js";

// The most members one object or array shows (the rest are counted, not drawn).
export const MAX_MEMBERS = 500;

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

function leaf(value) {
  if (value === null) return h("span", { class: "json-null" }, "null");
  const type = typeof value;
  if (type === "string") return h("span", { class: "json-string" }, JSON.stringify(value));
  if (type === "number" || type === "boolean") return h("span", { class: `json-${type}` }, String(value));
  return h("span", { class: "json-other" }, String(value));
}

// Whether the node at `path` at `depth` starts open: as it was (`folds`), else the
// first level only.
function startsOpen(path, depth, folds) {
  return folds.has(path) ? folds.get(path) : depth === 0;
}

function node(value, path, depth, folds) {
  if (value === null || typeof value !== "object") return leaf(value);
  const isArray = Array.isArray(value);
  const entries = isArray ? value.map((item, i) => [i, item]) : Object.entries(value);
  if (entries.length === 0) return h("span", { class: "json-empty" }, isArray ? "[]" : "{}");
  const summary = h(
    "summary",
    {},
    h("span", { class: "json-bracket" }, isArray ? "[…]" : "{…}"),
    " ",
    h("span", { class: "json-size" }, isArray ? plural(entries.length, "item") : plural(entries.length, "key")),
  );
  const details = h("details", { class: "json-node", "data-path": path }, summary);
  let built = false;
  const build = () => {
    if (built) return;
    built = true;
    const members = entries.slice(0, MAX_MEMBERS).map(([key, item]) => {
      const childPath = isArray ? `${path}[${key}]` : `${path}[${JSON.stringify(key)}]`;
      return h(
        "li",
        {},
        h("span", { class: isArray ? "json-index" : "json-key" }, isArray ? String(key) : JSON.stringify(key)),
        h("span", { class: "json-colon" }, ": "),
        node(item, childPath, depth + 1, folds),
      );
    });
    if (entries.length > MAX_MEMBERS) {
      members.push(h("li", { class: "json-more" }, `… ${plural(entries.length - MAX_MEMBERS, "more member")} not shown`));
    }
    details.append(h("ul", { class: "json-members" }, ...members));
  };
  details.addEventListener("toggle", () => {
    if (details.open) build();
  });
  if (startsOpen(path, depth, folds)) {
    build();
    details.open = true;
  }
  return details;
}

// The open state of every <details data-path> under `root` (a previous tree).
export function foldsOf(root) {
  const folds = new Map();
  if (!root) return folds;
  for (const details of root.querySelectorAll("details[data-path]")) folds.set(details.dataset.path, details.open);
  return folds;
}

// `value` as a tree; null or undefined (no result yet) as "–". `previous`: the tree this
// one replaces, whose folds it keeps.
export function jsonTree(value, previous = null) {
  if (value === null || value === undefined) return h("span", { class: "json-none" }, "–");
  return h("div", { class: "jsonview" }, node(value, "$", 0, foldsOf(previous)));
}

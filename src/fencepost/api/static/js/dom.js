// DOM helpers: every value reaches the page as a text node or an attribute set
// through the DOM, never as markup (nothing here hands a string to the HTML parser).

export const SVG_NS = "http://www.w3.org/2000/svg";

// -- DOM helpers -------------------------------------------------------------------------

export const $ = (id) => document.getElementById(id);

// h("td", {class: "x"}, "text", child): an element whose string children become text nodes.
export function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

export function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function show(node, visible) {
  node.hidden = !visible;
}

export function emptyRow(columns, text) {
  return h("tr", { class: "empty" }, h("td", { colspan: columns }, text));
}

// Small DOM helpers: elements are built with text nodes, never from HTML
// strings, so evidence text and reasoning are shown as written.

const SVG_NS = 'http://www.w3.org/2000/svg';

function fill(node, attrs, children) {
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    node.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return node;
}

/** An HTML element: `h('code', {class: 'x'}, 'text', child)`. */
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element, as `h`. */
export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

export const $ = (id) => document.getElementById(id);

const SEC = 1e9;

/** A duration in ns as people read it: `7.34 s`, `2 min 30 s`, `250 ms`. */
export function human(ns) {
  if (ns === 0) return '0 s';
  if (ns < SEC) return `${+(ns / 1e6).toFixed(1)} ms`;
  const secs = ns / SEC;
  if (secs < 60) return `${+secs.toFixed(secs < 10 ? 2 : 1)} s`;
  const min = Math.floor(secs / 60);
  const rest = Math.round(secs - min * 60);
  if (min < 60) return rest ? `${min} min ${rest} s` : `${min} min`;
  const hours = Math.floor(min / 60);
  return min % 60 ? `${hours} h ${min % 60} min` : `${hours} h`;
}

// DOM helpers. Everything from the API is rendered as text (textContent, attributes set
// one by one), never parsed as HTML: payloads and errors are attacker-controlled.

/** An element: h("a", {href: "/x", class: "y", onclick: f}, "text", child, [more]). */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      el.className = value;
    } else if (name === "text") {
      el.textContent = String(value);
    } else if (name in el && typeof value !== "string") {
      el[name] = value;  // properties such as checked, value, disabled
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const pad = (n) => String(n).padStart(2, "0");

/** A timestamp in the browser's time zone, to the second. */
export function formatTime(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A duration in seconds, shortly: "42s", "3m 5s", "2h 10m", "4d 3h". */
export function formatDuration(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

/** How long ago an ISO time was. */
export function age(iso) {
  return formatDuration((Date.now() - new Date(iso).getTime()) / 1000);
}

/** A JSON value, pretty-printed as text. */
export function jsonBlock(value, label) {
  return h("pre", {class: "json", tabindex: "0", "aria-label": label},
    value === null || value === undefined ? "null" : JSON.stringify(value, null, 2));
}

/** The status badge of a job. */
export function statusBadge(status) {
  return h("span", {class: `badge status-${String(status).toLowerCase()}`}, status);
}

/** ISO time with an explicit UTC offset, as the API's DateTime wants it. */
export function isoUtc(date) {
  return date.toISOString().replace("Z", "+00:00");
}

/** A labelled form field: the label wraps its input, so each input has a name to read. */
export function field(labelText, input, hint) {
  return h("label", {class: "field"}, h("span", {class: "field-label"}, labelText), input,
    hint ? h("span", {class: "hint"}, hint) : null);
}

/**
 * A modal confirmation: resolves true when the user confirms. `message` is text; the
 * dialog is a real <dialog>, so Escape cancels and focus stays inside it.
 */
export function confirmDialog(message, confirmText) {
  return new Promise((resolve) => {
    const dialog = h("dialog", {class: "confirm", "aria-label": "Confirm"});
    const done = (answer) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    const form = h("form", {method: "dialog", onsubmit: (e) => { e.preventDefault(); done(true); }},
      h("p", {class: "confirm-message"}, message),
      h("div", {class: "actions"},
        h("button", {type: "button", class: "secondary", onclick: () => done(false)}, "Keep"),
        h("button", {type: "submit", class: "danger"}, confirmText)));
    dialog.append(form);
    dialog.addEventListener("cancel", (e) => { e.preventDefault(); done(false); });
    document.body.append(dialog);
    dialog.showModal();
  });
}

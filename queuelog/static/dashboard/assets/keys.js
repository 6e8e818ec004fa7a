// API keys (admins): the list, a form to create one (its secret shown once), revoking.

import {confirmDialog, field, formatTime, h, replace} from "./dom.js";

const KEYS = `query ApiKeys {
  apiKeys { name role allowedTypes maxPriority createdAt revokedAt }
}`;
const CREATE = `mutation CreateApiKey($input: CreateApiKeyInput!) {
  createApiKey(input: $input) {
    apiKey { name role } secret userErrors { code message field }
  }
}`;
const REVOKE = `mutation RevokeApiKey($name: String!) { revokeApiKey(name: $name) }`;
const ROLES = ["PRODUCER", "WORKER", "VIEWER", "ADMIN"];
const PRIORITIES = ["LOW", "MEDIUM", "HIGH", "CRITICAL"];

export function renderKeys(ctx, view) {
  const list = h("div", {class: "table-wrap"});
  const secretBox = h("div", {class: "secret-box", "aria-live": "polite"});
  const select = (name, values, chosen) => h("select", {name},
    values.map((v) => h("option", {value: v, selected: v === chosen}, v.toLowerCase())));
  const form = h("form", {class: "create-key", onsubmit: async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const types = String(data.get("types")).split(/[\s,]+/).filter(Boolean);
    const input = {
      name: String(data.get("name")).trim(),
      role: data.get("role"),
      maxPriority: data.get("maxPriority"),
      allowedTypes: types.length ? types : null,
    };
    const made = await ctx.attempt(`Creating the key "${input.name}"`,
      () => ctx.api.mutate(CREATE, {input}));
    if (!made) return;
    form.reset();
    replace(secretBox, h("p", {}, `Key "${made.apiKey.name}" (${made.apiKey.role.toLowerCase()}) ` +
      "created. Copy its secret now: it is shown this once and never again."),
    h("output", {class: "secret", id: "new-secret", tabindex: "0"}, made.secret),
    h("button", {type: "button", class: "secondary", onclick: () => replace(secretBox)}, "Done"));
    load();
  }},
  h("h2", {}, "Create a key"),
  h("div", {class: "filter-fields"},
    field("Name", h("input", {type: "text", name: "name", required: true, autocomplete: "off"})),
    field("Role", select("role", ROLES, "PRODUCER")),
    field("Job types", h("input", {type: "text", name: "types", placeholder: "all"}),
      "comma-separated; empty: every type"),
    field("Highest priority", select("maxPriority", PRIORITIES, "MEDIUM"))),
  h("div", {class: "actions"}, h("button", {type: "submit"}, "Create key")));

  replace(view, h("h1", {}, "API keys"), form, secretBox, h("h2", {}, "Keys"), list);

  async function revoke(name) {
    if (!(await confirmDialog(`Revoke the key "${name}"? Its requests and connections are refused at once.`,
      "Revoke"))) return;
    const data = await ctx.attempt(`Revoking "${name}"`, () => ctx.api.query(REVOKE, {name}));
    if (!data) return;
    ctx.notify(data.revokeApiKey ? `Revoked "${name}".` : `No live key is named "${name}".`, "notice");
    load();
  }

  async function load() {
    const data = await ctx.attempt("Loading the API keys", () => ctx.api.query(KEYS));
    if (!data) return;
    replace(list, h("table", {class: "keys"},
      h("thead", {}, h("tr", {}, ["Name", "Role", "Job types", "Highest priority", "Created",
        "Status", ""].map((c) => h("th", {scope: "col"}, c)))),
      h("tbody", {}, data.apiKeys.map((key) => h("tr", {"data-name": key.name},
        h("td", {}, key.name), h("td", {}, key.role.toLowerCase()),
        h("td", {}, key.allowedTypes ? key.allowedTypes.join(", ") : "all"),
        h("td", {}, key.maxPriority.toLowerCase()), h("td", {}, formatTime(key.createdAt)),
        h("td", {}, key.revokedAt ? `revoked ${formatTime(key.revokedAt)}` : "live"),
        h("td", {}, key.revokedAt ? "" : h("button", {type: "button", class: "danger",
          "aria-label": `Revoke ${key.name}`, onclick: () => revoke(key.name)}, "Revoke")))))));
  }

  load();
  return () => {};
}

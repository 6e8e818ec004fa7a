// The jobs list: a filter kept in the URL's query string (shareable; the key never is),
// newest first, a cursor for the next page, and bulk cancel / retry of all that match.

import {confirmDialog, field, formatTime, h, isoUtc, replace, statusBadge} from "./dom.js";

const STATUSES = ["PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED"];
const CANCELLABLE = ["PENDING", "RUNNING"];
const RETRYABLE = ["FAILED", "CANCELLED"];
const PAGE_SIZE = 25;
const JOBS = `query Jobs($filter: JobFilter, $first: Int!, $after: String) {
  jobs(filter: $filter, first: $first, after: $after) {
    totalCount
    pageInfo { hasNextPage endCursor }
    nodes { id type status priority producer retryCount maxRetries createdAt }
  }
}`;
const COUNT = `query Count($filter: JobFilter) { jobs(filter: $filter, first: 1) { totalCount } }`;
const BULK = (verb) => `mutation Bulk($filter: JobFilter!, $limit: Int) {
  ${verb}Jobs(filter: $filter, limit: $limit) { count hasMore userErrors { code message field } }
}`;

/** The filter the URL's query string describes, as a JobFilter, or an error message. */
export function filterFromParams(params) {
  const filter = {};
  const statuses = params.getAll("status").filter((s) => STATUSES.includes(s));
  if (statuses.length) filter.statuses = statuses;
  const types = params.getAll("type").filter(Boolean);
  if (types.length) filter.types = types;
  for (const [param, name] of [["producer", "producer"], ["key", "idempotencyKey"]]) {
    if (params.get(param)) filter[name] = params.get(param);
  }
  const ids = (params.get("id") || "").split(/[\s,]+/).filter(Boolean);
  if (ids.length) filter.ids = ids;
  for (const [param, name] of [["from", "createdAfter"], ["to", "createdBefore"]]) {
    const value = params.get(param);
    if (!value) continue;
    const date = new Date(value);
    if (Number.isNaN(date.getTime())) return {error: `"${value}" is not a date and time.`};
    filter[name] = isoUtc(date);
  }
  if (params.get("payload")) {
    try {
      filter.payloadContains = JSON.parse(params.get("payload"));
    } catch {
      return {error: "Payload contains: that is not valid JSON."};
    }
  }
  return {filter};
}

/** datetime-local's value for an ISO time, in the browser's time zone. */
function localInput(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  return new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 19);
}

export function renderJobs(ctx, view) {
  const params = ctx.params;
  const {filter, error} = filterFromParams(params);
  const text = (name, label, value, extra = {}) =>
    field(label, h("input", {type: "text", name, value: value || "", ...extra}));

  const statusBoxes = h("fieldset", {class: "statuses"}, h("legend", {}, "Status"),
    STATUSES.map((s) => h("label", {class: "check"},
      h("input", {type: "checkbox", name: "status", value: s,
        checked: params.getAll("status").includes(s)}), s.toLowerCase())));
  const form = h("form", {class: "filter", role: "search", "aria-label": "Filter jobs",
    onsubmit: (event) => {
      event.preventDefault();
      const data = new FormData(form);
      const query = new URLSearchParams();
      for (const [name, value] of data) {
        if (typeof value !== "string" || !value.trim()) continue;
        if (name === "from" || name === "to") {
          query.append(name, isoUtc(new Date(value)));
        } else {
          query.append(name, value.trim());
        }
      }
      if (query.get("payload")) {
        try {
          JSON.parse(query.get("payload"));
        } catch {
          ctx.notify("Payload contains: that is not valid JSON.");
          return;
        }
      }
      const qs = query.toString();
      ctx.navigate(`/jobs${qs ? `?${qs}` : ""}`);
    }},
  statusBoxes,
  h("div", {class: "filter-fields"},
    text("type", "Type", params.get("type")),
    ctx.can.seesProducers ? text("producer", "Producer", params.get("producer")) : null,
    text("key", "Idempotency key", params.get("key")),
    text("id", "Job ids", params.get("id"), {placeholder: "e.g. 12, 15"}),
    field("Created from", h("input", {type: "datetime-local", step: "1", name: "from",
      value: params.get("from") ? localInput(params.get("from")) : ""})),
    field("Created to", h("input", {type: "datetime-local", step: "1", name: "to",
      value: params.get("to") ? localInput(params.get("to")) : ""})),
    field("Payload contains (JSON)", h("textarea", {name: "payload", rows: "1",
      placeholder: '{"to": "a@example.com"}'}, params.get("payload") || ""))),
  h("div", {class: "actions"},
    h("button", {type: "submit"}, "Apply filter"),
    h("a", {href: "/dashboard/jobs", class: "button secondary"}, "Clear")));

  const summary = h("p", {class: "summary", role: "status"});
  const table = h("div", {class: "table-wrap"});
  const pager = h("div", {class: "pager"});
  const bulk = h("div", {class: "bulk actions"});
  replace(view, h("h1", {}, "Jobs"), form, h("div", {class: "list-head"}, summary, bulk), table, pager);
  if (error) {
    ctx.notify(error);
    return () => {};
  }

  if (ctx.can.cancel) bulk.append(bulkButton("cancel", CANCELLABLE));
  if (ctx.can.act) bulk.append(bulkButton("retry", RETRYABLE));

  function bulkButton(verb, statuses) {
    const label = verb === "cancel" ? "Cancel all matching…" : "Retry all matching…";
    return h("button", {type: "button", class: verb === "cancel" ? "danger" : "secondary",
      id: `bulk-${verb}`, onclick: () => runBulk(verb, statuses)}, label);
  }

  async function runBulk(verb, statuses) {
    const chosen = filter.statuses ? filter.statuses.filter((s) => statuses.includes(s)) : statuses;
    const target = {...filter, statuses: chosen};
    const counted = chosen.length
      ? await ctx.attempt("Counting the jobs", () => ctx.api.query(COUNT, {filter: target}))
      : {jobs: {totalCount: 0}};
    if (!counted) return;
    const n = counted.jobs.totalCount;
    const which = statuses.map((s) => s.toLowerCase()).join(" or ");
    if (n === 0) {
      ctx.notify(`No ${which} job matches this filter: nothing to ${verb}.`, "notice");
      return;
    }
    const plural = n === 1 ? "job" : "jobs";
    const ok = await confirmDialog(
      `${verb === "cancel" ? "Cancel" : "Retry"} ${n} ${which} ${plural} matching this filter?`,
      `${verb === "cancel" ? "Cancel" : "Retry"} ${n} ${plural}`);
    if (!ok) return;
    let total = 0;
    for (;;) {
      const payload = await ctx.attempt(`${verb === "cancel" ? "Cancelling" : "Retrying"} jobs`,
        () => ctx.api.mutate(BULK(verb), {filter: target, limit: 1000}));
      if (!payload) break;
      total += payload.count;
      if (!payload.hasMore || payload.count === 0) break;
    }
    ctx.notify(`${verb === "cancel" ? "Cancelled" : "Retried"} ${total} ${total === 1 ? "job" : "jobs"}.`,
      "notice");
    load(null);
  }

  const pages = [];  // cursors of the pages before this one
  let current = params.get("after") || null;

  async function load(after) {
    table.setAttribute("aria-busy", "true");
    const data = await ctx.attempt("Loading the jobs", () =>
      ctx.api.query(JOBS, {filter, first: PAGE_SIZE, after}));
    table.setAttribute("aria-busy", "false");
    if (!data) return;
    const {nodes, totalCount, pageInfo} = data.jobs;
    replace(summary, `${totalCount} ${totalCount === 1 ? "job matches" : "jobs match"}` +
      (pages.length ? ` · page ${pages.length + 1}` : ""));
    replace(table, nodes.length ? h("table", {class: "jobs"},
      h("thead", {}, h("tr", {},
        ["Id", "Type", "Status", "Priority", "Producer", "Attempts", "Created"].map(
          (c) => h("th", {scope: "col"}, c)))),
      h("tbody", {}, nodes.map((job) => h("tr", {"data-id": job.id},
        h("td", {}, h("a", {href: `/dashboard/jobs/${encodeURIComponent(job.id)}`}, `#${job.id}`)),
        h("td", {}, job.type), h("td", {}, statusBadge(job.status)),
        h("td", {class: "priority"}, job.priority.toLowerCase()),
        h("td", {class: "producer"}, job.producer),
        h("td", {class: "attempts"}, `${job.retryCount}/${job.maxRetries}`),
        h("td", {class: "created"}, formatTime(job.createdAt))))))
      : h("p", {class: "empty"}, "No job matches this filter."));
    replace(pager,
      pages.length ? h("button", {type: "button", class: "secondary", onclick: () => {
        current = pages.pop();
        load(current);
      }}, "Previous page") : null,
      pageInfo.hasNextPage ? h("button", {type: "button", id: "next-page", onclick: () => {
        pages.push(current);
        current = pageInfo.endCursor;
        load(current);
      }}, "Next page") : null);
  }

  load(current);
  return () => {};
}

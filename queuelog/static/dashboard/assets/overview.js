// The overview: a card per job type with its counts by status (kept live by applying each
// jobStatusChanged event's previousStatus → status to its card), its paused state and the
// age of its oldest pending job; and the throughput of the last hour and the last day.

import {ThroughputChart} from "./charts.js";
import {age, field, h, isoUtc, replace} from "./dom.js";

const STATUSES = ["PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED"];
const TYPE_FIELDS = `name paused oldestPendingAt
  stats { pending running completed failed cancelled }
  limits { maxRunning maxRunningPerKey maxStartsPerSecond }`;
const JOB_TYPES = `query JobTypes { jobTypes { ${TYPE_FIELDS} } }`;
const THROUGHPUT = `query Throughput($since: DateTime!, $bucketSeconds: Int!, $type: String) {
  throughput(since: $since, bucketSeconds: $bucketSeconds, type: $type) {
    start enqueued started completed failed retried
  }
}`;
const EVENTS = `subscription OverviewEvents {
  jobStatusChanged { cursor previousStatus status occurredAt job { id type } }
}`;
const PAUSE = (name) => `mutation ${name === "pause" ? "Pause" : "Resume"}($type: String!) {
  ${name}JobType(type: $type) { jobType { ${TYPE_FIELDS} } userErrors { code message } }
}`;
const CHARTS = [
  ["Last hour, per minute", 3600, 60, "1 h ago"],
  ["Last day, per 30 minutes", 86400, 1800, "24 h ago"],
];

export function renderOverview(ctx, view) {
  const cards = h("div", {class: "cards", "aria-busy": "true"});
  const types = new Map();
  let loaded = false;
  let chartType = "";
  const charts = CHARTS.map(([title, , step, since]) => new ThroughputChart(title, step, since));
  const typeSelect = h("select", {id: "chart-type", onchange: () => {
    chartType = typeSelect.value;
    loadCharts();
  }}, h("option", {value: ""}, "All types"));

  replace(view,
    h("h1", {}, "Overview"),
    h("section", {"aria-labelledby": "types-heading"},
      h("h2", {id: "types-heading", class: "visually-hidden"}, "Job types"), cards),
    h("section", {class: "throughput", "aria-labelledby": "throughput-heading"},
      h("div", {class: "section-head"},
        h("h2", {id: "throughput-heading"}, "Throughput"),
        field("Types shown", typeSelect)),
      h("div", {class: "charts"}, charts.map((c) => c.el))));

  function card(jt) {
    const counts = h("dl", {class: "counts"}, STATUSES.map((status) => {
      const href = `/dashboard/jobs?type=${encodeURIComponent(jt.name)}&status=${status}`;
      return h("div", {class: `count status-${status.toLowerCase()}`},
        h("dt", {}, h("a", {href}, status.toLowerCase())),
        h("dd", {"data-status": status}, String(jt.stats[status.toLowerCase()])));
    }));
    const oldest = jt.stats.pending > 0 && jt.oldestPendingAt
      ? `Oldest pending: ${age(jt.oldestPendingAt)}` : "Nothing waiting";
    const {maxRunning, maxRunningPerKey, maxStartsPerSecond} = jt.limits || {};
    const limits = [
      maxRunning !== null && maxRunning !== undefined ? `${maxRunning} running` : null,
      maxRunningPerKey !== null && maxRunningPerKey !== undefined ? `${maxRunningPerKey} per key` : null,
      maxStartsPerSecond !== null && maxStartsPerSecond !== undefined ? `${maxStartsPerSecond} starts/s` : null,
    ].filter(Boolean).join(", ");
    let action = null;
    if (ctx.can.act) {
      const verb = jt.paused ? "resume" : "pause";
      action = h("button", {type: "button", class: "secondary",
        "aria-label": `${jt.paused ? "Resume" : "Pause"} ${jt.name}`,
        onclick: async (event) => {
          event.target.disabled = true;
          const payload = await ctx.attempt(`${verb} ${jt.name}`,
            () => ctx.api.mutate(PAUSE(verb), {type: jt.name}));
          if (payload) {
            ctx.notify(`${jt.name} ${jt.paused ? "resumed" : "paused"}.`, "notice");
            types.set(jt.name, {...payload.jobType, stats: types.get(jt.name).stats});
            draw();
          } else {
            event.target.disabled = false;
          }
        }}, jt.paused ? "Resume" : "Pause");
    }
    return h("article", {class: `card${jt.paused ? " paused" : ""}`, "data-type": jt.name},
      h("header", {},
        h("h3", {}, h("a", {href: `/dashboard/jobs?type=${encodeURIComponent(jt.name)}`}, jt.name)),
        jt.paused ? h("span", {class: "badge paused-badge"}, "paused") : null),
      counts,
      h("p", {class: "oldest", "data-oldest": jt.oldestPendingAt || ""}, oldest),
      limits ? h("p", {class: "limits"}, `At most ${limits}`) : null,
      action ? h("div", {class: "actions"}, action) : null);
  }

  function draw() {
    replace(cards, [...types.values()].map(card));
    if (!types.size) replace(cards, h("p", {}, "No job types."));
  }

  function apply(event) {
    if (!event || !event.job) return;
    for (const chart of charts) {
      if (!chartType || chartType === event.job.type) chart.add(event);
    }
    const jt = types.get(event.job.type);
    if (!jt) return;
    if (event.previousStatus) jt.stats[event.previousStatus.toLowerCase()] -= 1;
    jt.stats[event.status.toLowerCase()] += 1;
    if (jt.stats.pending === 0) jt.oldestPendingAt = null;
    else if (event.status === "PENDING" && !jt.oldestPendingAt) jt.oldestPendingAt = event.occurredAt;
    const el = cards.querySelector(`[data-type="${CSS.escape(jt.name)}"]`);
    if (el) el.replaceWith(card(jt));
  }

  async function loadTypes() {
    const data = await ctx.attempt("Loading the job types", () => ctx.api.query(JOB_TYPES));
    if (!data) return;
    types.clear();
    for (const jt of data.jobTypes) types.set(jt.name, jt);
    loaded = true;
    draw();
    cards.setAttribute("aria-busy", "false");
    const chosen = typeSelect.value;
    replace(typeSelect, h("option", {value: ""}, "All types"),
      data.jobTypes.map((jt) => h("option", {value: jt.name}, jt.name)));
    typeSelect.value = chosen;
  }

  async function loadCharts() {
    await Promise.all(CHARTS.map(async ([title, span, step], i) => {
      const since = new Date(Math.floor((Date.now() - span * 1000) / (step * 1000)) * step * 1000);
      const data = await ctx.attempt(`Loading the throughput (${title})`, () => ctx.api.query(
        THROUGHPUT, {since: isoUtc(since), bucketSeconds: step, type: chartType || null}));
      if (data) charts[i].set(data.throughput);
    }));
  }

  // Subscribe first, then read: events that arrive before the read answers are in it.
  const stop = ctx.socket.subscribe({
    query: EVENTS,
    next: (data) => { if (loaded && data) apply(data.jobStatusChanged); },
    error: (e) => ctx.notify(`Live updates stopped: ${e}`),
    resync: () => { loaded = false; loadTypes(); loadCharts(); },
  });
  loadTypes();
  loadCharts();
  // Ages are relative to now: refresh their text, without asking the server.
  const ticker = setInterval(() => {
    for (const p of cards.querySelectorAll("[data-oldest]")) {
      if (p.dataset.oldest) p.textContent = `Oldest pending: ${age(p.dataset.oldest)}`;
    }
  }, 1000);
  return () => {
    stop();
    clearInterval(ticker);
  };
}

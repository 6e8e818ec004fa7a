// Throughput charts as inline SVG built here: one line per kind of count over time buckets,
// with the latest bucket kept up to date from the live events.

import {h, formatTime} from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
export const SERIES = [
  ["enqueued", "Enqueued"],
  ["started", "Started"],
  ["completed", "Completed"],
  ["failed", "Failed"],
  ["retried", "Retried"],
];

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  for (const child of children) {
    if (typeof child === "string") el.append(document.createTextNode(child));
    else if (child) el.append(child);
  }
  return el;
}

/** The counts of one event: what each of the chart's series gains from it. */
export function eventCounts(event) {
  const {previousStatus: from, status: to} = event;
  return {
    enqueued: from === null ? 1 : 0,
    started: to === "RUNNING" ? 1 : 0,
    completed: to === "COMPLETED" ? 1 : 0,
    failed: to === "FAILED" ? 1 : 0,
    retried: from === "RUNNING" && to === "PENDING" ? 1 : 0,
  };
}

/**
 * A chart of `buckets` (the API's ThroughputBucket list, oldest first). `add(event)` counts
 * a live event into its bucket, opening new buckets (and dropping the oldest) as time moves.
 */
export class ThroughputChart {
  constructor(title, bucketSeconds, since) {
    this.title = title;
    this.since = since;  // how the first bucket's time reads, e.g. "1 h ago"
    this.bucketSeconds = bucketSeconds;
    this.buckets = [];
    this.el = h("figure", {class: "chart"});
  }

  set(buckets) {
    this.buckets = buckets.map((b) => ({...b, t: new Date(b.start).getTime()}));
    this.draw();
  }

  add(event) {
    if (!this.buckets.length) return;
    const t = new Date(event.occurredAt).getTime();
    const step = this.bucketSeconds * 1000;
    let last = this.buckets[this.buckets.length - 1];
    if (t < this.buckets[0].t) return;
    while (t >= last.t + step) {
      last = {t: last.t + step, start: new Date(last.t + step).toISOString(),
        enqueued: 0, started: 0, completed: 0, failed: 0, retried: 0};
      this.buckets.push(last);
      this.buckets.shift();
    }
    const bucket = this.buckets[Math.floor((t - this.buckets[0].t) / step)];
    if (!bucket) return;
    for (const [name, n] of Object.entries(eventCounts(event))) bucket[name] += n;
    this.draw();
  }

  draw() {
    const width = 600, height = 180, left = 36, bottom = 22, top = 8, right = 8;
    const buckets = this.buckets;
    const max = Math.max(1, ...buckets.flatMap((b) => SERIES.map(([k]) => b[k])));
    const x = (i) => left + (buckets.length > 1 ? (i * (width - left - right)) / (buckets.length - 1) : 0);
    const y = (v) => top + (height - top - bottom) * (1 - v / max);
    const totals = Object.fromEntries(SERIES.map(([k]) => [k, buckets.reduce((s, b) => s + b[k], 0)]));
    const chart = svg("svg", {
      viewBox: `0 0 ${width} ${height}`, class: "chart-svg", role: "img",
      "aria-label": `${this.title}: ` + SERIES.map(([k, label]) => `${label} ${totals[k]}`).join(", "),
    });
    for (const v of [0, Math.round(max / 2), max]) {
      chart.append(svg("line", {x1: left, x2: width - right, y1: y(v), y2: y(v), class: "grid"}));
      chart.append(svg("text", {x: left - 4, y: y(v) + 4, class: "axis", "text-anchor": "end"}, String(v)));
    }
    if (buckets.length) {
      chart.append(svg("text", {x: left, y: height - 6, class: "axis"},
        `${this.since} (${formatTime(buckets[0].start).slice(11, 16)})`));
      chart.append(svg("text", {x: width - right, y: height - 6, class: "axis", "text-anchor": "end"},
        "now"));
    }
    for (const [key] of SERIES) {
      const points = buckets.map((b, i) => `${x(i).toFixed(1)},${y(b[key]).toFixed(1)}`).join(" ");
      chart.append(svg("polyline", {points, class: `series series-${key}`}));
    }
    const legend = h("ul", {class: "legend"}, SERIES.map(([key, label]) =>
      h("li", {class: `legend-${key}`}, h("span", {class: "swatch", "aria-hidden": "true"}),
        `${label} `, h("strong", {}, String(totals[key])))));
    this.el.replaceChildren(h("figcaption", {}, this.title), chart, legend);
  }
}

// One job: its fields, payload, result, error and progress, and its history as a timeline,
// kept live by jobStatusChanged(jobId, after: the last cursor shown) and jobProgress.

import {confirmDialog, formatTime, h, jsonBlock, replace, statusBadge} from "./dom.js";

const FIELDS = `id type status priority payload result error progress retryCount maxRetries
  idempotencyKey producer runAt claimedAt workerId leaseExpiresAt createdAt updatedAt
  finishedAt concurrencyKey schedule`;
const JOB = `query Job($id: ID!) {
  job(id: $id) { ${FIELDS} events(first: 100) { cursor previousStatus status occurredAt } }
}`;
const EVENTS = `subscription JobEvents($jobId: ID!, $after: String) {
  jobStatusChanged(jobId: $jobId, after: $after) { cursor previousStatus status occurredAt }
}`;
const PROGRESS = `subscription JobProgress($jobId: ID!) {
  jobProgress(jobId: $jobId) { progress reportedAt }
}`;
const ACTION = (verb) => `mutation ${verb}($id: ID!) {
  ${verb}Job(id: $id) { job { id status } userErrors { code message } }
}`;

export function renderJob(ctx, view, id) {
  let job = null;
  let events = [];
  let stopProgress = null;
  const progressBox = h("div", {class: "progress-box"});
  const timeline = h("ol", {class: "timeline", "aria-label": "History"});
  const details = h("div", {class: "job-details"});
  replace(view, h("p", {class: "back"}, h("a", {href: "/dashboard/jobs"}, "← Jobs")),
    h("h1", {}, `Job #${id}`), details);

  const lastCursor = () => (events.length ? events[events.length - 1].cursor : null);

  async function load() {
    const data = await ctx.attempt(`Loading job #${id}`, () => ctx.api.query(JOB, {id}));
    if (!data) return;
    if (!data.job) {
      replace(details, h("p", {class: "empty"}, "No such job, or not one this key may see."));
      return;
    }
    job = data.job;
    events = job.events;
    draw();
    watchProgress();
  }

  function row(label, value) {
    return [h("dt", {}, label), h("dd", {}, value === null || value === undefined ? "—" : value)];
  }

  function drawTimeline() {
    replace(timeline, events.map((e) => h("li", {"data-status": e.status},
      h("time", {datetime: e.occurredAt}, formatTime(e.occurredAt)), " ",
      e.previousStatus ? [statusBadge(e.previousStatus), " → "] : "created ",
      statusBadge(e.status))));
  }

  function drawProgress(progress, reportedAt) {
    replace(progressBox, h("h2", {}, "Progress"),
      progress === null || progress === undefined
        ? h("p", {class: "empty"}, "No progress reported.")
        : jsonBlock(progress, "Progress"),
      reportedAt ? h("p", {class: "hint"}, `Reported ${formatTime(reportedAt)}`) : null);
  }

  function actions() {
    const buttons = [];
    const act = (verb, label, question) => h("button", {type: "button",
      class: verb === "cancel" ? "danger" : "secondary", id: `${verb}-job`,
      onclick: async (event) => {
        if (!(await confirmDialog(question, label))) return;
        event.target.disabled = true;
        const done = await ctx.attempt(`${label} #${id}`, () => ctx.api.mutate(ACTION(verb), {id}));
        if (done) {
          ctx.notify(`Job #${id}: ${done.job.status.toLowerCase()}.`, "notice");
          load();
        } else {
          event.target.disabled = false;
        }
      }}, label);
    if (ctx.can.cancel && ["PENDING", "RUNNING"].includes(job.status)) {
      buttons.push(act("cancel", "Cancel job", `Cancel job #${id} (${job.type})?`));
    }
    if (ctx.can.act && ["FAILED", "CANCELLED"].includes(job.status)) {
      buttons.push(act("retry", "Retry job", `Put job #${id} (${job.type}) back to pending?`));
    }
    return buttons.length ? h("div", {class: "actions"}, buttons) : null;
  }

  function draw() {
    drawTimeline();
    drawProgress(job.progress);
    const attempts = `${job.retryCount} failed of ${job.maxRetries} retries`;
    replace(details,
      h("div", {class: "job-head"}, statusBadge(job.status), h("span", {class: "job-type"}, job.type),
        actions()),
      h("div", {class: "job-grid"},
        h("section", {}, h("h2", {}, "Details"), h("dl", {class: "facts"},
          row("Priority", job.priority.toLowerCase()), row("Attempts", attempts),
          row("Producer", job.producer), row("Idempotency key", job.idempotencyKey),
          row("Worker", job.workerId), row("Concurrency key", job.concurrencyKey),
          row("Schedule", job.schedule), row("Created", formatTime(job.createdAt)),
          row("Run at", formatTime(job.runAt)), row("Claimed", formatTime(job.claimedAt)),
          row("Lease ends", formatTime(job.leaseExpiresAt)),
          row("Finished", formatTime(job.finishedAt)), row("Updated", formatTime(job.updatedAt)))),
        h("section", {}, h("h2", {}, "History"), timeline)),
      h("section", {}, h("h2", {}, "Payload"), jsonBlock(job.payload, "Payload")),
      h("section", {}, h("h2", {}, "Result"), jsonBlock(job.result, "Result")),
      job.error !== null ? h("section", {}, h("h2", {}, "Error"),
        h("pre", {class: "error-text", tabindex: "0"}, job.error)) : null,
      progressBox);
  }

  function watchProgress() {
    if (stopProgress || !job || job.status !== "RUNNING") return;
    stopProgress = ctx.socket.subscribe({
      query: PROGRESS,
      variables: () => ({jobId: id}),
      next: (data) => { if (data) drawProgress(data.jobProgress.progress, data.jobProgress.reportedAt); },
      complete: () => { stopProgress = null; },
      error: () => { stopProgress = null; },
    });
  }

  // Live history: each new event is appended, then the job is read again for its new fields.
  // A cursor past the server's retention ends the stream: read the job again, listen anew.
  let stopEvents = null;
  const listen = (after) => {
    stopEvents = ctx.socket.subscribe({
      query: EVENTS,
      variables: () => ({jobId: id, after: after === undefined ? lastCursor() : after}),
      next: (data) => {
        const event = data && data.jobStatusChanged;
        if (!event || !job || events.some((e) => e.cursor === event.cursor)) return;
        events.push(event);
        drawTimeline();
        load();
      },
      error: (e) => {
        if (e.code === "CURSOR_EXPIRED") {
          listen(null);
          load();
        } else {
          ctx.notify(`Live updates of job #${id} stopped: ${e}`);
        }
      },
      resync: () => load(),
    });
  };
  listen(undefined);
  load();
  return () => {
    stopEvents();
    if (stopProgress) stopProgress();
  };
}

// The dashboard page. Every value from the store is set with textContent,
// never as markup, so a payload cannot become part of the page.
"use strict";

const CSRF = document.querySelector('meta[name="csrf-token"]').content;
const STATES = ["ready", "scheduled", "leased", "dead"];
const PAGE = 100; // items per page of a queue's state
let timer = null;
let route = "";
let nextNotice = ""; // shown after the next navigation (e.g. after a purge)

// ---- small helpers -------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue; // an attribute left off
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c !== null && c !== undefined) node.append(c);
  }
  return node;
}

// Replaces the page's main part; `null` stands for "nothing here".
function setMain(...nodes) {
  document.getElementById("main").replaceChildren(...nodes.filter((n) => n !== null));
}

function showError(message) {
  const box = document.getElementById("error");
  box.textContent = message;
  box.hidden = !message;
}

function notice(message) {
  const box = document.getElementById("notice");
  box.textContent = message;
  box.hidden = !message;
}

// A GET without a body; a write (POST unless `method` says) with one.
async function api(path, body, method) {
  const init = body === undefined ? {} : {
    method: method || "POST",
    headers: { "content-type": "application/json", "x-csrf-token": CSRF },
    body: JSON.stringify(body),
  };
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    throw new Error("cannot reach the dashboard server: " + e.message);
  }
  let data = null;
  try {
    data = await response.json();
  } catch (e) {
    throw new Error("the dashboard answered " + response.status + " without JSON");
  }
  if (!response.ok) {
    const err = new Error((data && data.error) || "request failed with " + response.status);
    err.kind = data && data.kind; // "not_found", "invalid_input", …
    throw err;
  }
  return data;
}

// "in 3 min 20 s", "5 s ago": a time relative to the backend's now.
function relative(ms, now) {
  if (ms === null || ms === undefined) return "";
  return ms >= now ? "in " + duration(ms - now) : duration(now - ms) + " ago";
}

// "2025-06-01 14:03:20", local time.
function localTime(ms) {
  const d = new Date(ms);
  return d.getFullYear() + "-" + pad2(d.getMonth() + 1) + "-" + pad2(d.getDate()) + " " +
    pad2(d.getHours()) + ":" + pad2(d.getMinutes()) + ":" + pad2(d.getSeconds());
}

// A time as "5 s ago" over its local date and time; the exact instant
// (UTC) in `datetime` and the tooltip.
function timeCell(ms, now) {
  if (ms === null || ms === undefined) return null;
  const iso = new Date(ms).toISOString();
  return el("span", { class: "when" },
    el("time", { datetime: iso, title: iso, "data-ms": String(ms), text: relative(ms, now) }),
    el("small", { class: "muted", text: localTime(ms) }));
}

// Asks in the page's modal; `typed` is text to type again, `labels` the
// buttons' words ({ yes, no }) when "Confirm" and "Cancel" would mislead.
function confirmWith(text, typed, labels) {
  return new Promise((resolve) => {
    const modal = document.getElementById("modal");
    const input = document.getElementById("modal-input");
    document.getElementById("modal-text").textContent = text;
    document.getElementById("modal-confirm").textContent = (labels && labels.yes) || "Confirm";
    document.getElementById("modal-cancel").textContent = (labels && labels.no) || "Cancel";
    input.hidden = typed === undefined;
    input.value = "";
    input.placeholder = typed || "";
    modal.hidden = false;
    const done = (ok) => {
      modal.hidden = true;
      confirmBtn.removeEventListener("click", yes);
      cancelBtn.removeEventListener("click", no);
      resolve(ok);
    };
    const yes = () => done(typed === undefined || input.value === typed);
    const no = () => done(false);
    const confirmBtn = document.getElementById("modal-confirm");
    const cancelBtn = document.getElementById("modal-cancel");
    confirmBtn.addEventListener("click", yes);
    cancelBtn.addEventListener("click", no);
    (typed === undefined ? confirmBtn : input).focus();
  });
}

function crumbs(...parts) {
  const nav = document.getElementById("crumbs");
  nav.replaceChildren();
  for (const [label, href] of parts) {
    nav.append(" / ", href ? el("a", { href, text: label }) : el("span", { text: label }));
  }
}

function queuePath(name) {
  return "/api/queues/" + encodeURIComponent(name);
}

function pausedBadge(paused) {
  return paused ? el("span", { class: "badge", "data-paused": "true", text: "paused" }) : null;
}

function pauseButton(name, paused) {
  return paused
    ? el("button", { type: "button", class: "resume", onclick: () => resumeQueue(name), text: "Resume" })
    : el("button", { type: "button", class: "pause", onclick: () => pauseQueue(name), text: "Pause…" });
}

function payloadCell(p) {
  const pre = el("pre", { class: "payload", text: p.text });
  const meta = p.bytes + " bytes" + (p.encoding === "hex" ? ", not UTF-8: hex" : "") +
    (p.truncated ? ", cut" : "");
  return el("div", {}, pre, el("small", { class: "muted payload-meta", text: meta }));
}

// ---- overview ------------------------------------------------------------

async function overview() {
  crumbs(["queues", null]);
  const [data, history] = await Promise.all([api("/api/overview"), loadHistory("")]);

  const rows = data.queues.map((q) =>
    el("tr", { "data-queue": q.name },
      el("td", {}, el("a", { href: "#/queue/" + encodeURIComponent(q.name) + "/ready", text: q.name }),
        pausedBadge(q.paused)),
      ...STATES.map((s) => el("td", { "data-state": s, class: "num", text: String(q[s]) })),
      el("td", { "data-state": "total", class: "num", text: String(q.total) }),
      el("td", {}, data.control ? pauseButton(q.name, q.paused) : null)));
  const table = el("table", { id: "queues" },
    el("thead", {}, el("tr", {}, el("th", { text: "queue" }),
      ...STATES.map((s) => el("th", { class: "num", text: s })),
      el("th", { class: "num", text: "total" }), el("th", { text: "" }))),
    el("tbody", {}, ...rows));
  const empty = data.queues.length === 0
    ? el("p", { class: "muted", text: "No queue holds items." }) : null;
  setMain(
    el("h1", { text: "Queues" }), table, empty,
    el("h2", { text: "Items per state, all queues" }),
    chart("depth", history, STATES, stateCount),
    ...throughputChart(history),
    el("p", { id: "chart-caption", class: "muted", text: chartCaption(history) }));
}

// ---- one queue -----------------------------------------------------------

async function queuePage(name, state, offset) {
  const q = encodeURIComponent(name);
  crumbs(["queues", "#/"], [name, null], [state, null]);
  const [data, history] = await Promise.all([
    api("/api/queues/" + q + "/items?state=" + state + "&offset=" + offset + "&limit=" + PAGE),
    loadHistory(name)]);
  const dueHead = { scheduled: "due", leased: "lease expires" }[state];
  const head = ["id", "enqueued", dueHead, "attempts", "priority", "last error", "payload"]
    .filter((h) => h);
  if (state === "leased") head.push("progress");
  head.push("");
  const rows = data.items.map((it) => {
    const cells = [
      el("td", {}, el("a", { href: "#/queue/" + q + "/item/" + it.id, text: it.id }), it.cancel_requested
        ? el("span", { class: "badge", "data-cancel-requested": "true", text: "cancel requested" }) : null),
      el("td", { "data-field": "enqueued" }, timeCell(it.enqueued_at_ms, data.now_ms)),
      dueHead ? el("td", { "data-field": "due" }, timeCell(it.due_at_ms, data.now_ms)) : null,
      el("td", { class: "num", text: it.attempts + "/" + it.max_attempts }),
      el("td", { class: "num", text: String(it.priority) }),
      el("td", { class: "err", text: it.last_error || "" }),
      el("td", {}, payloadCell(it.payload)),
    ];
    if (state === "leased") cells.push(el("td", {}, it.progress ? payloadCell(it.progress) : null));
    const buttons = el("td", { class: "buttons" });
    if (state === "dead") {
      buttons.append(el("button", { type: "button", class: "redrive-one",
        onclick: () => redriveOne(name, it.id), text: "Redrive" }));
    }
    if (data.control && state === "scheduled") {
      buttons.append(el("button", { type: "button", class: "run-now-one",
        onclick: () => runNowOne(name, it.id), text: "Run now" }));
    }
    if (data.control) {
      buttons.append(el("button", { type: "button", class: "cancel-one",
        onclick: () => cancelOne(name, it.id, state, false), text: "Cancel…" }));
    }
    cells.push(buttons);
    return el("tr", { "data-id": it.id }, ...cells.filter((c) => c));
  });
  const actions = el("div", { class: "actions" },
    data.control ? pauseButton(name, data.queue.paused) : null,
    data.control && state === "scheduled" ? el("button", { id: "run-all-now", type: "button",
      onclick: () => runAllNow(name), text: "Run all now…" }) : null,
    state === "dead" ? el("button", { id: "redrive-all", type: "button",
      onclick: () => redriveAll(name), text: "Redrive all dead" }) : null,
    state === "dead" ? el("button", { id: "purge", type: "button", class: "danger",
      onclick: () => purge(name), text: "Purge queue…" }) : null);
  const chartBox = history.tracked
    ? chart("queue", history, STATES, stateCount)
    : el("p", { class: "muted", text: "No history is kept for this queue: the dashboard keeps it for 100 queues." });
  setMain(
    el("h1", {}, name, pausedBadge(data.queue.paused)), queueTabs(name, data.queue, state),
    retentionLine(name, data.retention), actions,
    pager(name, state, data),
    el("table", { id: "items" }, el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { text: h })))),
      el("tbody", {}, ...rows)),
    data.items.length === 0 ? el("p", { class: "muted", text: "No " + state + " items" +
      (data.offset > 0 ? " from " + (data.offset + 1) + " on." : ".") }) : null,
    el("h2", { text: "Items per state over time" }), chartBox,
    ...completionChart("queue-completed", history));
}

// A tab per state with its count, and the kept finished items.
function queueTabs(name, counts, current) {
  const q = encodeURIComponent(name);
  const tab = (s, label) => el("a", { href: "#/queue/" + q + "/" + s,
    class: s === current ? "tab on" : "tab", "data-state": s, text: label });
  return el("div", { class: "tabs" }, ...STATES.map((s) => tab(s, s + " (" + counts[s] + ")")),
    tab("completed", "completed"));
}

// "Items 101–200 of 523" between Previous and Next. The count is the
// store's (an estimate on PostgreSQL past its exact limit); Next shows
// while a peek finds more.
function pager(name, state, data) {
  const base = "#/queue/" + encodeURIComponent(name) + "/" + state + "/";
  const first = data.offset + 1, last = data.offset + data.items.length;
  // Kept items have no count: the range is shown without one.
  const count = data.queue[state];
  const range = data.items.length ? "Items " + first + "–" + last +
    (count === undefined ? "" : " of " + count) : "";
  const capped = !data.more && last >= data.max_offset && !(count <= last)
    ? " (paging stops at " + data.max_offset + ", the most one peek returns)" : "";
  const go = (offset) => () => { location.hash = base + Math.max(0, offset); };
  return el("div", { class: "pager" },
    el("button", { id: "page-prev", type: "button", onclick: go(data.offset - data.limit),
      disabled: data.offset > 0 ? null : "", text: "← Previous" }),
    el("span", { id: "page-range", text: range + capped }),
    el("button", { id: "page-next", type: "button", onclick: go(data.offset + data.limit),
      disabled: data.more ? null : "", text: "Next →" }));
}

async function redriveOne(name, id) {
  const r = await act(() => api(queuePath(name) + "/redrive", { id }));
  if (r) notice(r.moved ? "Item " + id + " redriven: it is Ready again." : "Item " + id + " was not dead any more.");
  render();
}

async function redriveAll(name) {
  if (!(await confirmWith("Move every dead item of " + name + " back to ready?"))) return;
  const r = await act(() => api(queuePath(name) + "/redrive", { all: true }));
  if (r) notice(r.moved + " items redriven.");
  render();
}

async function purge(name) {
  const ok = await confirmWith("Delete every item of " + name + " in every state? Type the queue's name to confirm.", name);
  if (!ok) return;
  const r = await act(() => api(queuePath(name) + "/purge", { confirm: name }));
  if (!r) return;
  nextNotice = r.deleted + " items deleted.";
  location.hash = "#/";
}

async function removeOne(name, id, state) {
  const warning = state === "leased" ? " A worker holds it: its lease is lost and its result dropped." : "";
  if (!(await confirmWith("Remove item " + id + " from " + name + " for good?" + warning))) return;
  const q = encodeURIComponent(name);
  const r = await act(() => api("/api/queues/" + q + "/items/" + encodeURIComponent(id), {}, "DELETE"));
  if (!r) return;
  nextNotice = "Item " + id + " removed (it was " + r.removed + ").";
  location.hash = "#/queue/" + q + "/" + r.removed;
}

async function pauseQueue(name) {
  const ok = await confirmWith("Pause " + name + "? Workers claim nothing from it until it is " +
    "resumed; enqueues go on and jobs already running finish.", undefined, { yes: "Pause" });
  if (!ok) return;
  const r = await act(() => api(queuePath(name) + "/pause", {}));
  if (r) notice(name + " paused: workers claim nothing from it until it is resumed.");
  render();
}

async function resumeQueue(name) {
  const r = await act(() => api(queuePath(name) + "/resume", {}));
  if (r) notice(name + " resumed.");
  render();
}

// `leave`: from the item's own page, which a cancelled item no longer has.
async function cancelOne(name, id, state, leave) {
  const what = state === "leased"
    ? " A worker is running it: it is asked to stop, and the item ends cancelled when its lease ends."
    : " It leaves the queue for good.";
  const ok = await confirmWith("Cancel item " + id + " of " + name + "?" + what, undefined,
    { yes: "Cancel item", no: "Keep it" });
  if (!ok) return;
  const r = await act(() => api(queuePath(name) + "/items/" + encodeURIComponent(id) + "/cancel", {}));
  if (!r) return;
  if (r.cancelled === "requested") {
    notice("Cancel requested for item " + id + ": its worker stops it now.");
    render();
    return;
  }
  const message = "Item " + id + " cancelled" + (r.was ? " (it was " + r.was + ")." : ".");
  if (!leave) {
    notice(message);
    render();
    return;
  }
  nextNotice = message;
  location.hash = "#/queue/" + encodeURIComponent(name) + "/" + (r.was || "ready");
}

async function runNowOne(name, id) {
  const r = await act(() => api(queuePath(name) + "/run-now", { id }));
  if (r) notice(r.moved ? "Item " + id + " is ready now." : "Item " + id + " was not scheduled any more.");
  render();
}

async function runAllNow(name) {
  const ok = await confirmWith("Run every scheduled item of " + name + " now? Delayed jobs and " +
    "retries waiting out their backoff become ready at once.", undefined, { yes: "Run all now" });
  if (!ok) return;
  const r = await act(() => api(queuePath(name) + "/run-now", { all: true }));
  if (r) notice(r.moved + " scheduled items moved to ready.");
  render();
}

async function act(call) {
  try {
    const r = await call();
    showError("");
    return r;
  } catch (e) {
    showError(e.message);
    return null;
  }
}

// ---- one item ------------------------------------------------------------

// The item route whose item this page saw in the queue: when it is gone
// at the next look, it finished while watched.
let seenLive = "";

async function itemPage(name, id) {
  const q = encodeURIComponent(name);
  crumbs(["queues", "#/"], [name, "#/queue/" + q + "/ready"], ["item " + id, null]);
  let answer;
  try {
    answer = await api("/api/queues/" + q + "/items/" + encodeURIComponent(id));
  } catch (e) {
    if (e.kind !== "not_found") throw e;
    if (seenLive === route) {
      setMain(el("h1", { text: "Item " + id }),
        el("p", { id: "outcome", "data-outcome": "not-kept", text: "finished (not kept)" }),
        el("p", { class: "muted", text: "It left the queue while this page watched it (acked, " +
          "cancelled or removed), and the queue's retention keeps no record of it." }));
      return;
    }
    // Acked, removed, or never there: ids are not reused, so it is gone.
    setMain(el("h1", { text: "Item " + id }), el("p", { id: "not-found", class: "muted",
      text: "Queue " + name + " holds no item " + id + ": it was never there, or it is done " +
        "(acked, cancelled or removed) and not kept." }));
    return;
  }
  if (answer.finished) {
    finishedRecord(name, answer.finished, answer.now_ms);
    return;
  }
  seenLive = route;
  const { item, now_ms, control } = answer;
  const fields = [
    ["id", item.id], ["state", item.state], ["attempts", item.attempts + " of " + item.max_attempts],
    ["priority", String(item.priority)], ["dedup key", item.dedup_key || ""],
    ["enqueued", timeCell(item.enqueued_at_ms, now_ms)],
  ];
  if (item.state === "scheduled") fields.push(["due", timeCell(item.due_at_ms, now_ms)]);
  if (item.state === "leased") fields.push(["lease expires", timeCell(item.due_at_ms, now_ms)]);
  fields.push(["last error", item.last_error || ""]);
  if (item.state === "leased") {
    fields.push(["progress", item.progress ? item.progress.text : ""],
      ["cancel requested", item.cancel_requested ? "yes: the item ends cancelled when its lease ends" : "no"]);
  }
  const redrive = item.state === "dead" ? el("button", { id: "redrive-item", type: "button",
    onclick: () => redriveOne(name, item.id), text: "Redrive this item" }) : null;
  const runNow = control && item.state === "scheduled" ? el("button", { id: "run-now-item",
    type: "button", onclick: () => runNowOne(name, item.id), text: "Run now" }) : null;
  const cancel = control ? el("button", { id: "cancel-item", type: "button", class: "danger",
    onclick: () => cancelOne(name, item.id, item.state, true), text: "Cancel this item…" }) : null;
  const remove = el("button", { id: "remove-item", type: "button", class: "danger",
    onclick: () => removeOne(name, item.id, item.state), text: "Remove this item…" });
  setMain(
    el("h1", { text: "Item " + item.id }),
    el("p", { id: "outcome", class: "muted", "data-outcome": "live", text: "in the queue: " +
      item.state + (answer.history ? "; this page follows it, and shows how it ended" : "") }),
    fieldList(fields),
    el("div", { class: "actions" }, redrive, runNow, cancel, remove),
    el("h2", { text: "Payload" }), payloadCell(item.payload));
}

// Label and value pairs as a list; a value is text or a node.
function fieldList(fields) {
  return el("dl", { id: "item" }, ...fields.flatMap(([k, v]) =>
    [el("dt", { text: k }), typeof v === "string" ? el("dd", { "data-field": k, text: v })
      : el("dd", { "data-field": k }, v)]));
}

// ---- live workers --------------------------------------------------------

async function workersPage() {
  crumbs(["workers", null]);
  const data = await api("/api/workers");
  const itemLink = (queue, id) =>
    el("a", { href: "#/queue/" + encodeURIComponent(queue) + "/item/" + encodeURIComponent(id), text: "item " + id });
  const rows = data.workers.map((w) => el("tr", { "data-worker": w.id },
    el("td", { text: w.id }),
    el("td", { text: w.host }),
    el("td", { class: "num", text: String(w.pid) }),
    el("td", {}, el("a", { href: "#/queue/" + encodeURIComponent(w.queue) + "/leased", text: w.queue })),
    el("td", { class: "num", "data-field": "running", text: w.jobs.length + " of " + w.concurrency }),
    el("td", {}, w.jobs.length === 0 ? el("span", { class: "muted", text: "idle" })
      : el("ul", { class: "jobs" }, ...w.jobs.map((j) => el("li", { "data-id": j.id },
        itemLink(w.queue, j.id),
        " (attempt " + j.attempt + ", started " + relative(j.started_at_ms, data.now_ms) + ")")))),
    el("td", { text: relative(w.expires_at_ms, data.now_ms) })));
  const head = ["id", "host", "pid", "queue", "running", "jobs", "entry expires"];
  setMain(
    el("h1", { text: "Live workers" }),
    el("table", { id: "workers" }, el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { text: h })))),
      el("tbody", {}, ...rows)),
    data.workers.length === 0 ? el("p", { class: "muted", text: "No live workers." }) : null,
    el("p", { class: "muted", text: "Each worker renews its entry at every heartbeat; a worker " +
      "that dies leaves the list when its entry expires." }));
}

// ---- routing -------------------------------------------------------------

async function render() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  route = location.hash;
  try {
    if (parts[0] === "workers") await workersPage();
    else if (parts[0] === "queue" && parts[2] === "item" && parts[3]) await itemPage(parts[1], parts[3]);
    else if (parts[0] === "queue" && parts[2] === "retention") await retentionPage(parts[1]);
    else if (parts[0] === "queue" && parts[2] === "completed") {
      await completedPage(parts[1], /^\d+$/.test(parts[3] || "") ? Number(parts[3]) : 0);
    }
    else if (parts[0] === "queue" && parts[1]) {
      const offset = /^\d+$/.test(parts[3] || "") ? Number(parts[3]) : 0;
      await queuePage(parts[1], STATES.includes(parts[2]) ? parts[2] : "ready", offset);
    }
    else await overview();
    showError("");
    document.getElementById("status").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    showError(e.message);
  }
}

// The header's "find item" form opens an item's page by queue and id.
function findItem(event) {
  event.preventDefault();
  const queue = document.getElementById("find-queue").value.trim();
  const id = document.getElementById("find-id").value.trim();
  if (!queue) {
    showError("Name the queue to look in.");
    return;
  }
  if (!/^\d+$/.test(id)) {
    showError("An item id is a whole number; " + JSON.stringify(id) + " is not.");
    return;
  }
  document.getElementById("find-id").value = ""; // the crumbs show it now
  location.hash = "#/queue/" + encodeURIComponent(queue) + "/item/" + id;
}

// On a queue's pages the form looks in that queue, unless one is typed.
function fillFindQueue() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const input = document.getElementById("find-queue");
  if (parts[0] === "queue" && parts[1] && document.activeElement !== input) input.value = parts[1];
}

// Every page refreshes each second (an item's page follows its job live),
// but the retention form, which a refresh would wipe while typed in.
function schedule() {
  clearInterval(timer);
  if (/^#\/queue\/[^/]+\/retention$/.test(location.hash)) return;
  timer = setInterval(() => {
    if (document.getElementById("modal").hidden && route === location.hash) render();
  }, 1000);
}

window.addEventListener("hashchange", () => {
  notice(nextNotice);
  nextNotice = "";
  fillFindQueue();
  render();
  schedule();
});
document.getElementById("find").addEventListener("submit", findItem);
fillFindQueue();
render();
schedule();

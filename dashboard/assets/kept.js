// Finished items a queue keeps (the backend's History group): the
// Completed tab, an item's finished record, and the retention policy.
// Like app.js, every value from the store is set as text.
"use strict";

const ENDINGS = ["completed", "cancelled"];

// "kept for 1 h, the newest 10000 at most", or "not kept".
function describeKeep(k) {
  if (!k.keeps) return "not kept";
  const parts = [];
  if (k.max_age_secs !== null) parts.push("for " + duration(k.max_age_secs * 1000));
  if (k.max_count !== null) parts.push("the newest " + k.max_count + " at most");
  return "kept " + (parts.length ? parts.join(", ") : "until removed (no bound)");
}

// The tool's command that keeps a day of completed items.
function retentionCommand(name) {
  return "leaseq retention " + name + " --completed-secs 86400 --completed-count 10000";
}

// The queue's policy in one line, with a link to change it.
function retentionLine(name, retention) {
  if (!retention) {
    return el("p", { id: "retention", class: "muted",
      text: "Finished items: this backend keeps none (it does not offer the History group)." });
  }
  return el("p", { id: "retention" }, "Retention: completed ",
    el("span", { "data-ending": "completed", text: describeKeep(retention.completed) }),
    "; cancelled ", el("span", { "data-ending": "cancelled", text: describeKeep(retention.cancelled) }),
    ". ", el("a", { id: "edit-retention", href: "#/queue/" + encodeURIComponent(name) + "/retention",
      text: "Change retention…" }));
}

// Why the Completed tab is empty when the queue keeps nothing.
function retentionOff(name, history) {
  if (!history) {
    return el("p", { id: "no-history", class: "muted",
      text: "This backend keeps no finished items: it does not offer the History group." });
  }
  return el("div", { id: "retention-off" },
    el("p", { class: "muted", text: "Queue " + name + " keeps no finished items: its retention is " +
      "off (the default), so a completed item is gone at once. Turn it on with Change retention " +
      "above, or with the tool:" }),
    el("pre", { class: "command", text: retentionCommand(name) }));
}

function resultCell(f) {
  if (f.result) return payloadCell(f.result);
  return el("span", { class: "muted", text: f.ending === "cancelled" ? "" : "none" });
}

// The kept items of a queue, newest first, in pages like a state's items.
async function completedPage(name, offset) {
  const q = encodeURIComponent(name);
  crumbs(["queues", "#/"], [name, null], ["completed", null]);
  const [data, history] = await Promise.all([
    api(queuePath(name) + "/finished?offset=" + offset + "&limit=" + PAGE), loadHistory(name)]);
  const head = ["id", "ending", "finished", "attempts", "result", "payload"];
  const rows = data.items.map((f) => el("tr", { "data-id": f.id, "data-ending": f.ending },
    el("td", {}, el("a", { href: "#/queue/" + q + "/item/" + f.id, text: f.id })),
    el("td", { "data-field": "ending", text: f.ending }),
    el("td", { "data-field": "finished" }, timeCell(f.finished_at_ms, data.now_ms)),
    el("td", { class: "num", text: String(f.attempts) }),
    el("td", { "data-field": "result" }, resultCell(f)),
    el("td", {}, payloadCell(f.payload))));
  const keeps = data.retention && data.retention.keeps_any;
  const empty = !keeps && data.items.length === 0 ? retentionOff(name, data.history)
    : data.items.length === 0 ? el("p", { class: "muted", text: "No kept items" +
      (data.offset > 0 ? " from " + (data.offset + 1) + " on." : " yet.") }) : null;
  setMain(
    el("h1", {}, name, pausedBadge(data.queue.paused)), queueTabs(name, data.queue, "completed"),
    retentionLine(name, data.retention),
    pager(name, "completed", data),
    el("table", { id: "finished" }, el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { text: h })))),
      el("tbody", {}, ...rows)),
    empty, ...completionChart("queue-completed", history));
}

// An item out of the queue that the queue kept: how it ended, and its result.
function finishedRecord(name, f, now) {
  const fields = [
    ["id", f.id], ["state", "finished"], ["ending", f.ending],
    ["finished", timeCell(f.finished_at_ms, now)], ["enqueued", timeCell(f.enqueued_at_ms, now)],
    ["attempts", String(f.attempts)], ["last error", f.last_error || ""],
  ];
  const result = f.result ? payloadCell(f.result) : el("p", { class: "muted",
    text: f.ending === "cancelled" ? "none: the item was cancelled" : "none: its handler set no result" });
  setMain(
    el("h1", { text: "Item " + f.id }),
    el("p", { id: "outcome", "data-outcome": f.ending, text: "finished: " + f.ending }),
    fieldList(fields),
    el("h2", { text: "Result" }), el("div", { id: "result" }, result),
    el("h2", { text: "Payload" }), payloadCell(f.payload),
    el("p", { class: "muted", text: "Kept by the queue's retention (" + name + "); it goes when the " +
      "policy no longer keeps it." }));
}

// The form that sets a queue's retention policy.
async function retentionPage(name) {
  const q = encodeURIComponent(name);
  crumbs(["queues", "#/"], [name, "#/queue/" + q + "/completed"], ["retention", null]);
  const data = await api(queuePath(name) + "/retention");
  if (!data.history) {
    setMain(el("h1", { text: "Retention of " + name }), retentionOff(name, false));
    return;
  }
  const rows = ENDINGS.map((ending) => {
    const k = data.retention[ending];
    return el("fieldset", { "data-ending": ending },
      el("legend", {}, el("label", {}, el("input", { type: "checkbox", id: "keep-" + ending,
        checked: k.keeps ? "" : null }), " keep " + ending + " items")),
      el("label", {}, "for at most ",
        el("input", { type: "text", id: ending + "-secs", inputmode: "numeric", autocomplete: "off",
          value: k.keeps && k.max_age_secs !== null ? String(k.max_age_secs) : null }), " seconds"),
      el("label", {}, " and at most ",
        el("input", { type: "text", id: ending + "-count", inputmode: "numeric", autocomplete: "off",
          value: k.keeps && k.max_count !== null ? String(k.max_count) : null }), " items (the newest)"));
  });
  setMain(
    el("h1", { text: "Retention of " + name }),
    el("p", { class: "muted", text: "A finished item the policy keeps leaves the queue but stays " +
      "readable, with its result, until it is older than the age or past the count. Applies to " +
      "items that finish from now on. Leave a bound empty for none." }),
    el("form", { id: "retention-form", onsubmit: (e) => saveRetention(e, name) }, ...rows,
      el("div", { class: "actions" },
        el("button", { type: "submit", id: "save-retention", text: "Save" }),
        el("button", { type: "button", id: "retention-nothing", class: "danger",
          onclick: () => keepNothing(name), text: "Keep nothing…" }))),
    el("p", { class: "muted", text: "From the tool: " + retentionCommand(name) }));
}

// One ending's policy from the form: null when not kept.
function readKeep(ending) {
  if (!document.getElementById("keep-" + ending).checked) return null;
  const number = (id, what) => {
    const v = document.getElementById(id).value.trim();
    if (v === "") return null;
    if (!/^\d+$/.test(v)) throw new Error(what + " of " + ending + " items is a whole number; " + JSON.stringify(v) + " is not.");
    return Number(v);
  };
  const keep = { max_age_secs: number(ending + "-secs", "The age"), max_count: number(ending + "-count", "The count") };
  if (keep.max_age_secs === null && keep.max_count === null) {
    throw new Error("Give an age or a count for " + ending + " items: without either, every one is kept for good.");
  }
  return keep;
}

async function saveRetention(event, name) {
  event.preventDefault();
  let body;
  try {
    body = { completed: readKeep("completed"), cancelled: readKeep("cancelled") };
  } catch (e) {
    showError(e.message);
    return;
  }
  await storeRetention(name, body);
}

async function keepNothing(name) {
  const ok = await confirmWith("Keep no finished items of " + name + "? Items already kept go at " +
    "the next collection.", undefined, { yes: "Keep nothing" });
  if (ok) await storeRetention(name, { completed: null, cancelled: null });
}

async function storeRetention(name, body) {
  const r = await act(() => api(queuePath(name) + "/retention", body));
  if (!r) return;
  nextNotice = "Retention of " + name + " saved: completed " + describeKeep(r.retention.completed) +
    "; cancelled " + describeKeep(r.retention.cancelled) + ".";
  location.hash = "#/queue/" + encodeURIComponent(name) + "/completed";
}

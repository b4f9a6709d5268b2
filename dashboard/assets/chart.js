// Charts of the counts the dashboard server samples. The server keeps the
// history, so a chart shows the past when the page opens or reloads; the
// page fetches only the samples newer than the last it has.
"use strict";

const COLORS = { ready: "#2a7", scheduled: "#888", leased: "#27c", dead: "#c33", drained: "#a50", completed: "#063" };
// Time-axis steps (seconds): the first that gives at most 6 ticks.
const TICK_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
const MIN_SAMPLES_WIDE = 30; // a young history gets an axis 30 intervals wide
const histories = new Map(); // "" (all queues) or a queue's name -> {samples, every_ms, capacity, tracked}

// The history of one queue, or of all queues with `queue` empty.
async function loadHistory(queue) {
  const key = queue || "";
  const known = histories.get(key);
  const params = [];
  if (queue) params.push("queue=" + encodeURIComponent(queue));
  if (known && known.samples.length) params.push("after_ms=" + known.samples[known.samples.length - 1].t_ms);
  const data = await api("/api/history" + (params.length ? "?" + params.join("&") : ""));
  const h = known && data.tracked ? known : { samples: [] };
  // Two refreshes in flight may both fetch the same samples: keep each once.
  const after = h.samples.length ? h.samples[h.samples.length - 1].t_ms : -1;
  h.samples.push(...data.samples.filter((p) => p.t_ms > after));
  h.samples.splice(0, Math.max(0, h.samples.length - data.capacity));
  h.every_ms = data.every_ms;
  h.capacity = data.capacity;
  h.tracked = data.tracked;
  histories.set(key, h);
  return h;
}

function pad2(n) {
  return String(n).padStart(2, "0");
}

// "14:03:20", or "14:03" when the axis steps by minutes; the day too when
// the history spans more than one.
function tickLabel(ms, stepMs, spanMs) {
  const d = new Date(ms);
  let s = pad2(d.getHours()) + ":" + pad2(d.getMinutes());
  if (stepMs < 60000) s += ":" + pad2(d.getSeconds());
  if (spanMs > 86400000) s = (d.getMonth() + 1) + "/" + d.getDate() + " " + s;
  return s;
}

// "1 h 5 min", "30 s": a duration for people.
function duration(ms) {
  if (Math.abs(ms) < 1000) return Math.round(Math.abs(ms)) + " ms";
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 60) return s + " s";
  const m = Math.floor(s / 60);
  if (m < 60) return m + " min" + (s % 60 ? " " + (s % 60) + " s" : "");
  const h = Math.floor(m / 60);
  if (h < 48) return h + " h" + (m % 60 ? " " + (m % 60) + " min" : "");
  return Math.floor(h / 24) + " d" + (h % 24 ? " " + (h % 24) + " h" : "");
}

function countLabel(v) {
  if (v >= 10000) return Math.round(v / 1000) + "k";
  return v >= 10 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(1);
}

// A line per series over a time axis. `value(samples, series, i)` gives
// sample i's value. The canvas carries what it drew as data attributes
// (samples, first and last time, tick labels), for tests and tools.
function chart(id, history, series, value) {
  const w = 720, h = 170, left = 44, right = 10, top = 8, bottom = 38;
  const samples = history.samples;
  const canvas = el("canvas", { id: "chart-" + id, width: String(w), height: String(h),
    "data-samples": String(samples.length) });
  const ctx = canvas.getContext("2d");
  if (!ctx) return canvas;
  const last = samples.length ? samples[samples.length - 1].t_ms : Date.now();
  const span = Math.max(MIN_SAMPLES_WIDE * (history.every_ms || 1000),
    samples.length ? last - samples[0].t_ms : 0);
  const start = last - span;
  const pw = w - left - right, ph = h - top - bottom;
  const x = (t) => left + pw * (t - start) / span;
  let max = 1;
  samples.forEach((_p, i) => series.forEach((s) => { max = Math.max(max, value(samples, s, i)); }));
  const y = (v) => top + ph * (1 - v / max);
  if (samples.length) {
    canvas.dataset.firstMs = String(samples[0].t_ms);
    canvas.dataset.lastMs = String(last);
  }

  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, w, h);
  ctx.font = "11px sans-serif";
  ctx.strokeStyle = "#eee";
  ctx.fillStyle = "#555";
  ctx.textAlign = "right";
  for (const v of [0, max / 2, max]) {
    ctx.beginPath();
    ctx.moveTo(left, y(v));
    ctx.lineTo(w - right, y(v));
    ctx.stroke();
    ctx.fillText(countLabel(v), left - 4, y(v) + 4);
  }
  const stepMs = (TICK_STEPS.find((s) => span / (s * 1000) <= 6) || TICK_STEPS[TICK_STEPS.length - 1]) * 1000;
  const ticks = [];
  ctx.textAlign = "center";
  for (let t = Math.ceil(start / stepMs) * stepMs; t <= last; t += stepMs) {
    ctx.beginPath();
    ctx.moveTo(x(t), top);
    ctx.lineTo(x(t), top + ph + 4);
    ctx.stroke();
    const label = tickLabel(t, stepMs, span);
    ctx.fillText(label, x(t), top + ph + 15);
    ticks.push(label);
  }
  canvas.dataset.ticks = ticks.join(",");
  ctx.strokeStyle = "#ccc";
  ctx.strokeRect(left, top, pw, ph);

  // A gap in sampling (the backend was down) stays a gap.
  const gap = 3 * (history.every_ms || 1000);
  ctx.textAlign = "left";
  series.forEach((s, k) => {
    ctx.strokeStyle = COLORS[s] || "#000";
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    samples.forEach((p, i) => {
      const px = x(p.t_ms), py = y(value(samples, s, i));
      if (i === 0 || p.t_ms - samples[i - 1].t_ms > gap) ctx.moveTo(px, py); else ctx.lineTo(px, py);
    });
    ctx.stroke();
    ctx.lineWidth = 1;
    ctx.fillStyle = COLORS[s] || "#000";
    ctx.fillText(s, left + 8 + k * 90, h - 6);
  });
  return canvas;
}

// The state counts of sample i.
function stateCount(samples, s, i) {
  return samples[i][s];
}

// Net items leaving per second between two samples: enqueues hide
// completions, so this is a lower bound of the completion rate.
function drainRate(samples, _s, i) {
  if (i === 0) return 0;
  const total = (p) => p.ready + p.scheduled + p.leased + p.dead;
  const dt = (samples[i].t_ms - samples[i - 1].t_ms) / 1000;
  return dt > 0 ? Math.max(0, (total(samples[i - 1]) - total(samples[i])) / dt) : 0;
}

// Completions per second between two samples, from the completion
// counter (kept Completed items that finished in each window).
function completionRate(samples, _s, i) {
  if (i === 0 || samples[i].completed === null || samples[i].completed === undefined) return 0;
  const dt = (samples[i].t_ms - samples[i - 1].t_ms) / 1000;
  return dt > 0 ? samples[i].completed / dt : 0;
}

// A completion counter is there: the backend counts completions.
function hasCounter(history) {
  return history.samples.some((p) => p.completed !== null && p.completed !== undefined);
}

// One queue's completion-rate chart, or why there is none; never a guess
// from the net drain.
function completionChart(id, history) {
  if (!history.tracked) return [];
  const title = el("h2", { text: "Completions per second" });
  if (!hasCounter(history)) {
    return [title, el("p", { id: "counter-note", class: "muted", text: "No completion counter: " +
      "this backend does not count completions (it has no History group)." })];
  }
  return [title, chart(id, history, ["completed"], completionRate),
    el("p", { id: "counter-note", class: "muted", text: "From the queue's completion counter, " +
      "per sample." })];
}

// The overview's throughput: completions from the counters, else (a
// backend that does not count) the net drain, a lower bound, said so.
function throughputChart(history) {
  if (hasCounter(history)) {
    return [el("h2", { text: "Completions per second" }),
      chart("throughput", history, ["completed"], completionRate),
      el("p", { id: "counter-note", class: "muted", text: "From each queue's completion counter." })];
  }
  return [el("h2", { text: "Throughput: items leaving the queues per second (net of new ones)" }),
    chart("throughput", history, ["drained"], drainRate),
    el("p", { id: "counter-note", class: "muted", text: "No completion counter: this backend does " +
      "not count completions, so this is the net drain, a lower bound." })];
}

// What a chart covers, in words.
function chartCaption(history) {
  const every = duration(history.every_ms);
  const kept = duration(history.every_ms * history.capacity);
  return "Sampled every " + every + " by the dashboard server, which keeps the last " + kept +
    " (" + history.samples.length + " of " + history.capacity + " samples so far). Times are local.";
}

// The Chandy dashboard: polls the driver's REST API (same origin) and draws one job at a time.
// No build step and no CDN: plain ES2017 and the vendored uPlot (static/vendor).
"use strict";

const REFRESH_MS = 1000;
const ENDED = new Set(["FINISHED", "FAILED", "CANCELED"]);
const state = {
  jobId: null, plan: null, planJob: null, samples: [], since: 0, throughputChart: null, checkpointChart: null,
  chartUids: null, polls: 0, endedPolls: 0, exceptionsShown: null, timer: null,
};

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child === null || child === undefined ? "" : child);
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const child of children) node.append(child);
  return node;
}

// The server's token (actions need it; reads too when the server says so) arrives once, in the address the
// driver's log prints (?token=...): it is kept for this tab and taken out of the address bar, so that a copied
// or shared address does not carry it along.
const TOKEN = (() => {
  const params = new URLSearchParams(location.search);
  const given = params.get("token");
  if (given) {
    sessionStorage.setItem("chandy-token", given);
    params.delete("token");
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
  }
  return given || sessionStorage.getItem("chandy-token");
})();

async function api(path, options) {
  options = options || {};
  if (TOKEN) options.headers = Object.assign({}, options.headers, {"Authorization": "Bearer " + TOKEN});
  const response = await fetch(path, options);
  const body = await response.json();
  if (!response.ok) throw new Error((body.errors || [response.statusText]).join("; "));
  return body;
}

function count(n) {
  if (n === null || n === undefined) return "";
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toPrecision(3) + "G";
  if (a >= 1e6) return (n / 1e6).toPrecision(3) + "M";
  if (a >= 1e3) return (n / 1e3).toPrecision(3) + "k";
  return String(Math.round(n));
}

function bytes(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}

function ms(n) {
  if (n === null || n === undefined) return "";
  if (n >= 86400e3) return (n / 86400e3).toFixed(1) + " d";
  if (n >= 3600e3) return (n / 3600e3).toFixed(1) + " h";
  if (n >= 60e3) return (n / 60e3).toFixed(1) + " min";
  return n >= 1000 ? (n / 1000).toFixed(2) + " s" : n.toFixed(n < 10 ? 1 : 0) + " ms";
}

function duration(msTotal) {
  const s = Math.max(0, Math.floor(msTotal / 1000));
  return `${Math.floor(s / 3600)}:${String(Math.floor(s / 60) % 60).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
}

function time(epochMs) {
  return epochMs ? new Date(epochMs).toLocaleTimeString() : "";
}

function instant(epochMs) {
  // A watermark may be outside what a Date can show (event time in another unit): show the number then.
  if (epochMs === null || epochMs === undefined) return "";
  const date = new Date(epochMs);
  return isFinite(date.getTime()) ? date.toISOString() : String(epochMs);
}

// -- the job list ------------------------------------------------------------------------------------

function chooseJob(jobs) {
  const hash = location.hash.match(/^#\/jobs\/([0-9a-f]+)/);
  if (hash && jobs.some((j) => j.jid === hash[1])) return hash[1];
  if (state.jobId && jobs.some((j) => j.jid === state.jobId)) return state.jobId;
  const running = jobs.filter((j) => !ENDED.has(j.state));
  const pick = (running.length ? running : jobs).slice(-1)[0];
  return pick ? pick.jid : null;
}

const ENDED_LISTED = 8;  // ended jobs listed besides the running ones and the one shown

function drawJobs(jobs) {
  const nav = $("jobs");
  const ended = jobs.filter((j) => ENDED.has(j.state) && j.jid !== state.jobId);
  const hidden = new Set(ended.slice(0, Math.max(0, ended.length - ENDED_LISTED)).map((j) => j.jid));
  const listed = jobs.filter((j) => !hidden.has(j.jid));
  const more = hidden.size ? [el("span", {class: "more"}, `(${hidden.size} older ended jobs: GET /jobs/overview)`)] : [];
  nav.replaceChildren(...more, ...listed.map((j) => {
    const link = el("a", {href: `#/jobs/${j.jid}`, "data-jid": j.jid}, `${j.name} (${j.state.toLowerCase()})`);
    if (j.jid === state.jobId) link.className = "selected";
    return link;
  }));
}

// -- the graph ---------------------------------------------------------------------------------------

const NODE_W = 190, NODE_H = 64, GAP_X = 70, GAP_Y = 28, PAD = 16;

function layout(plan) {
  const byId = new Map(plan.nodes.map((n) => [n.id, n]));
  const layer = new Map();
  const depth = (node, seen) => {
    if (layer.has(node.id)) return layer.get(node.id);
    if (seen.has(node.id)) return 0;
    seen.add(node.id);
    let d = 0;
    for (const input of node.inputs) {
      const source = byId.get(input.id);
      if (source) d = Math.max(d, depth(source, seen) + 1);
    }
    layer.set(node.id, d);
    return d;
  };
  plan.nodes.forEach((n) => depth(n, new Set()));
  // Each chain takes one row over the columns its operators use; chains that do not overlap share a row.
  const rows = [];
  const rowOf = new Map();
  for (const chain of plan.chains) {
    const layers = chain.operators.map((uid) => layer.get(uid));
    const lo = Math.min(...layers), hi = Math.max(...layers);
    let row = 0;
    while ((rows[row] || []).some(([a, b]) => !(hi < a || lo > b))) row++;
    (rows[row] = rows[row] || []).push([lo, hi]);
    chain.operators.forEach((uid) => rowOf.set(uid, row));
  }
  const position = new Map();
  for (const n of plan.nodes) {
    position.set(n.id, {x: PAD + layer.get(n.id) * (NODE_W + GAP_X), y: PAD + rowOf.get(n.id) * (NODE_H + GAP_Y)});
  }
  const width = PAD * 2 + (Math.max(...layer.values()) + 1) * (NODE_W + GAP_X) - GAP_X;
  const height = PAD * 2 + Math.max(1, rows.length) * (NODE_H + GAP_Y) - GAP_Y;
  return {position, width, height};
}

function drawGraph(plan) {
  const {position, width, height} = layout(plan);
  const root = svg("svg", {width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "job graph"});
  for (const chain of plan.chains) {
    if (chain.operators.length < 2) continue;
    const points = chain.operators.map((uid) => position.get(uid));
    const x = Math.min(...points.map((p) => p.x)) - 6, y = Math.min(...points.map((p) => p.y)) - 6;
    const x2 = Math.max(...points.map((p) => p.x)) + NODE_W + 6, y2 = Math.max(...points.map((p) => p.y)) + NODE_H + 6;
    root.append(svg("rect", {class: "chain-box", x, y, width: x2 - x, height: y2 - y, "data-chain": chain.index}));
  }
  for (const node of plan.nodes) {
    const to = position.get(node.id);
    for (const input of node.inputs) {
      const from = position.get(input.id);
      if (!from) continue;
      const x1 = from.x + NODE_W, y1 = from.y + NODE_H / 2, x2 = to.x, y2 = to.y + NODE_H / 2;
      const mid = (x1 + x2) / 2;
      root.append(svg("path", {class: "edge" + (input.chained ? " chained" : ""),
                               d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`,
                               "data-from": input.id, "data-to": node.id}));
      const label = input.chained ? "chained" : input.ship_strategy + (input.side_output ? ` [${input.side_output}]` : "");
      root.append(svg("text", {class: "edge-label", x: mid - 24, y: (y1 + y2) / 2 - 4}, label));
    }
  }
  for (const node of plan.nodes) {
    const p = position.get(node.id);
    const group = svg("g", {class: "node bp-ok", "data-uid": node.id, transform: `translate(${p.x},${p.y})`});
    group.append(svg("rect", {width: NODE_W, height: NODE_H}));
    group.append(svg("text", {x: 8, y: 17}, node.description.slice(0, 28)));
    group.append(svg("text", {class: "uid", x: 8, y: 32}, `${node.id.slice(0, 22)}  p=${node.parallelism}`));
    group.append(svg("text", {class: "rates", x: 8, y: 50}, ""));
    root.append(group);
  }
  $("graph").replaceChildren(root);
}

function updateGraph(vertices) {
  for (const v of vertices) {
    const group = document.querySelector(`#graph g.node[data-uid="${CSS.escape(v.id)}"]`);
    if (!group) continue;
    const m = v.metrics || {};
    group.setAttribute("class", `node bp-${m["backpressure-level"] || "ok"}`);
    group.querySelector("text.rates").textContent =
      `in ${count(m["read-records-per-second"] || 0)}/s  out ${count(m["write-records-per-second"] || 0)}/s  ` +
      `bp ${Math.round((m["backpressure-ratio"] || 0) * 100)}%`;
  }
}

// -- tables ------------------------------------------------------------------------------------------

function bpBadge(level, ratio) {
  return el("span", {class: `bp-${level}`}, `${level} ${Math.round(ratio * 100)}%`);
}

// A connector's own counts: records behind the end of its splits (a Kafka source's partitions), records
// skipped, transactions committed and aborted, bytes read and written (as the connected system holds them).
function connectorText(c) {
  if (!c) return "";
  const parts = [];
  const lags = Object.values(c["split-lag"] || {});
  if (c["split-lag"]) parts.push(`${count(lags.reduce((a, b) => a + b, 0))} behind (${lags.length} splits)`);
  if (c["records-skipped"]) parts.push(`${count(c["records-skipped"])} skipped`);
  if (c["transactions-committed"] !== undefined) {
    parts.push(`${count(c["transactions-committed"])} committed, ${count(c["transactions-aborted"] || 0)} aborted`);
  }
  if (c["records-sent"] !== undefined) parts.push(`${count(c["records-sent"])} sent`);
  if (c["bytes-read"] !== undefined) parts.push(`${bytes(c["bytes-read"])} read`);
  if (c["bytes-written"] !== undefined) parts.push(`${bytes(c["bytes-written"])} written`);
  return parts.join("; ");
}

function drawOperators(job) {
  $("operator-rows").replaceChildren(...job.vertices.map((v) => {
    const m = v.metrics || {};
    const state = m["state-bytes"] !== null && m["state-bytes"] !== undefined
      ? `${count(m["state-entries"])} / ${bytes(m["state-bytes"])}` : (m["state-entries"] ? count(m["state-entries"]) : "");
    return el("tr", {"data-uid": v.id},
      el("td", {}, v.name), el("td", {class: "text"}, v.id), el("td", {}, String(v.parallelism)),
      el("td", {class: "records-in"}, count(m["read-records"])), el("td", {class: "records-out"}, count(m["write-records"])),
      el("td", {class: "rate-in"}, count(m["read-records-per-second"])),
      el("td", {class: "rate-out"}, count(m["write-records-per-second"])),
      el("td", {}, bytes(m["read-bytes"])), el("td", {}, bytes(m["write-bytes"])),
      el("td", {}, bpBadge(m["backpressure-level"] || "ok", m["backpressure-ratio"] || 0)),
      el("td", {}, `${Math.round((m["busy-ratio"] || 0) * 100)}%`),
      el("td", {}, instant(m["current-input-watermark"])),
      el("td", {}, ms(m["watermark-lag-ms"])), el("td", {}, count(m["late-records-dropped"])), el("td", {}, state),
      el("td", {class: "connector text"}, connectorText(m.connector)));
  }));
  $("watermark-rows").replaceChildren(...job.vertices.map((v) => {
    const m = v.metrics || {};
    const mark = m["current-input-watermark"];
    return el("tr", {"data-uid": v.id}, el("td", {}, `${v.name} (${v.id})`),
      el("td", {}, mark !== null && mark !== undefined ? instant(mark) : "none yet"),
      el("td", {}, ms(m["watermark-lag-ms"])));
  }));
}

function drawCheckpoints(checkpoints) {
  if (!checkpoints.enabled) {
    $("checkpoint-counts").textContent = "Checkpointing is off for this job.";
    $("checkpoint-rows").replaceChildren();
    return;
  }
  const c = checkpoints.counts;
  $("checkpoint-counts").textContent = `${c.completed} completed, ${c.failed} failed, ${c.in_progress} in progress` +
    (checkpoints.latest.restored ? `; restored from checkpoint ${checkpoints.latest.restored.id}` : "");
  $("checkpoint-rows").replaceChildren(...checkpoints.history.map((h) => el("tr", {class: h.status, "data-id": h.id},
    el("td", {}, String(h.id) + (h.is_savepoint ? " (savepoint)" : "")), el("td", {class: "text"}, h.status),
    el("td", {}, time(h.trigger_timestamp)), el("td", {}, ms(h.end_to_end_duration)), el("td", {}, bytes(h.state_size)),
    el("td", {}, ms(h.alignment_duration)), el("td", {}, ms(h.sync_duration)), el("td", {}, ms(h.async_duration)),
    el("td", {}, `${h.num_acknowledged_subtasks}/${h.num_subtasks}`),
    el("td", {class: "text"}, h.failure_message || ""))));
  const done = checkpoints.history.filter((h) => h.status === "COMPLETED").reverse();
  const data = [done.map((h) => h.id), done.map((h) => h.end_to_end_duration), done.map((h) => h.alignment_duration)];
  const box = $("checkpoint-chart");
  box.dataset.checkpoints = String(done.length);
  if (!state.checkpointChart) {
    state.checkpointChart = new uPlot({
      title: "Checkpoint duration (ms)", width: chartWidth(), height: 180,
      scales: {x: {time: false}},
      axes: [{label: "checkpoint id"}, {}],
      series: [{label: "id"}, {label: "end to end", stroke: "#3367d6", points: {show: true}},
               {label: "alignment", stroke: "#e69500", points: {show: true}}],
    }, data, box);
  } else {
    state.checkpointChart.setData(data);
  }
}

function drawExceptions(answer) {
  const entries = answer.exceptionHistory.entries;
  // Redrawn only when something changed: a traceback the user opened stays open.
  const key = `${answer.restarts}/${entries.map((e) => e.timestamp).join()}`;
  if (key === state.exceptionsShown) return;
  state.exceptionsShown = key;
  if (!entries.length) {
    $("exceptions").replaceChildren(el("p", {class: "note"}, `None (restarts: ${answer.restarts}).`));
    return;
  }
  $("exceptions").replaceChildren(el("p", {class: "note"}, `Restarts: ${answer.restarts}`), ...entries.map((e) =>
    el("details", {"data-attempt": e.attempt},
      el("summary", {}, `${time(e.timestamp)} attempt ${e.attempt}: ${e.exceptionName}` +
        (e.taskName ? ` in '${e.taskName}' subtask ${e.subtask}` : "") + (e.restarted ? " (restarted)" : "")),
      el("pre", {}, e.stacktrace))));
}

// -- the throughput chart ----------------------------------------------------------------------------

function chartWidth() {
  return Math.max(400, Math.min(1100, document.body.clientWidth - 60));
}

function drawThroughput(plan) {
  const uids = plan.nodes.map((n) => n.id);
  const samples = state.samples;
  const data = [samples.map((s) => s.t / 1000)];
  // Records out of each operator; a sink's are the records it wrote (its records in).
  plan.nodes.forEach((n) => data.push(samples.map((s) => (s.operators[n.id] || [0, 0])[n.is_sink ? 0 : 1])));
  const box = $("throughput-chart");
  box.dataset.samples = String(samples.length);
  if (!state.throughputChart || state.chartUids !== uids.join()) {
    if (state.throughputChart) state.throughputChart.destroy();
    const colors = ["#3367d6", "#e69500", "#2e9e44", "#c23b3b", "#7b4fc9", "#1b9aaa", "#a0522d", "#666"];
    state.throughputChart = new uPlot({
      title: "Records per second out of each operator (sources: read; sinks: written)", width: chartWidth(), height: 220,
      series: [{}, ...plan.nodes.map((n, i) => ({label: n.description, stroke: colors[i % colors.length],
                                                  value: (u, v) => count(v)}))],
      axes: [{}, {values: (u, values) => values.map(count), size: 60}],
    }, data, box);
    state.chartUids = uids.join();
  } else {
    state.throughputChart.setData(data);
  }
}

// -- polling -----------------------------------------------------------------------------------------

async function poll() {
  try {
    const overview = await api("/jobs/overview");
    const jobs = overview.jobs;
    const chosen = chooseJob(jobs);
    if (chosen !== state.jobId) {
      Object.assign(state, {jobId: chosen, plan: null, samples: [], since: 0, endedPolls: 0, exceptionsShown: null});
      if (state.checkpointChart) { state.checkpointChart.destroy(); state.checkpointChart = null; }
    }
    drawJobs(jobs);
    $("empty").hidden = jobs.length > 0;
    $("job").hidden = !chosen;
    if (!chosen) return;
    const base = `/jobs/${chosen}`;
    const [job, checkpoints, history, exceptions] = await Promise.all([
      api(base), api(`${base}/checkpoints`), api(`${base}/metrics/history?since=${state.since}`), api(`${base}/exceptions`)]);
    if (chosen !== state.jobId) return;  // another job was chosen meanwhile: these answers are not its
    if (!state.plan || state.planJob !== chosen) {
      state.plan = job.plan;
      state.planJob = chosen;
      drawGraph(job.plan);
    }
    state.samples = state.samples.concat(history.samples).slice(-600);
    if (history.samples.length) state.since = history.samples[history.samples.length - 1].t;
    $("job-name").textContent = job.name;
    $("job-state").textContent = job.state;
    $("job-state").className = `state ${job.state}`;
    $("job-duration").textContent = duration(job.duration);
    $("job-restarts").textContent = String(job.restarts);
    $("job-in").textContent = count(job["records-in-per-second"]);
    $("job-out").textContent = count(job["records-out-per-second"]);
    const ended = ENDED.has(job.state);
    $("trigger-checkpoint").disabled = ended || !job.checkpointing;
    $("cancel-job").disabled = ended;
    updateGraph(job.vertices);
    drawOperators(job);
    drawThroughput(job.plan);
    drawCheckpoints(checkpoints);
    drawExceptions(exceptions);
    $("error").hidden = true;
    state.endedPolls = ended ? state.endedPolls + 1 : 0;
  } catch (error) {
    $("error").textContent = `The driver does not answer (${error.message}): the job's program may have exited.`;
    $("error").hidden = false;
  }
  state.polls += 1;
  $("last-update").dataset.polls = String(state.polls);
  $("last-update").textContent = `updated ${new Date().toLocaleTimeString()}`;
}

// One poll at a time: a poll asked for while one runs (another job chosen) starts when it has drawn.
let polling = false, pollAgain = false;
async function tick() {
  if (polling) { pollAgain = true; return; }
  polling = true;
  clearTimeout(state.timer);
  try {
    await poll();
  } finally {
    polling = false;
  }
  if (pollAgain) { pollAgain = false; tick(); return; }
  // An ended job shows its final state: it is read again rarely, in case another job starts.
  state.timer = setTimeout(tick, state.endedPolls > 2 ? 5 * REFRESH_MS : REFRESH_MS);
}

async function act(label, path, method) {
  try {
    const answer = await api(path, {method, headers: {"Content-Type": "application/json"}, body: "{}"});
    $("action-result").dataset.requestId = answer["request-id"] || "";
    $("action-result").textContent = `${label}: ${answer["request-id"] ? "requested (" + answer["request-id"].slice(0, 8) + ")" : "done"}`;
  } catch (error) {
    $("action-result").textContent = `${label} failed: ${error.message}`;
  }
}

$("trigger-checkpoint").addEventListener("click", () => act("Checkpoint", `/jobs/${state.jobId}/checkpoints`, "POST"));
$("cancel-job").addEventListener("click", () => {
  if (confirm("Cancel this job?")) act("Cancel", `/jobs/${state.jobId}?mode=cancel`, "PATCH");
});
window.addEventListener("hashchange", tick);
tick();

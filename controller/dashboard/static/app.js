// sluice dashboard: reads the HTTP API (docs/http-api.md) and follows the
// server-sent event stream. No framework: two views rendered from strings,
// every value from the API escaped before it reaches innerHTML.
"use strict";

const api = "../api/v1";
const verbs = ["promote", "abort", "retry", "approve", "pause", "resume"];
const tokenKey = "sluice-token";
let server = { tokenRequired: false };
let stream = null; // the EventSource of the current view

const $ = (sel) => document.querySelector(sel);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const token = () => sessionStorage.getItem(tokenKey) || "";
// The server refuses a write without this header: an HTML form on another
// site cannot send it (docs/http-api.md, cross-site requests).
const clientHeader = { "X-Sluice-Client": "dashboard" };

// keepToken stores the token for this tab, and in a cookie that the event
// stream sends (EventSource sets no Authorization header); the server
// takes the cookie for reads only, never for a command.
function keepToken(t) {
  const secure = location.protocol === "https:" ? "; Secure" : "";
  if (t) {
    sessionStorage.setItem(tokenKey, t);
    document.cookie = `${tokenKey}=${encodeURIComponent(t)}; Path=/; SameSite=Strict${secure}`;
  } else {
    sessionStorage.removeItem(tokenKey);
    document.cookie = `${tokenKey}=; Path=/; Max-Age=0; SameSite=Strict${secure}`;
  }
}

function authHeaders() {
  return token() ? { Authorization: "Bearer " + token() } : {};
}

async function getJSON(path) {
  const res = await fetch(api + path, { headers: { Accept: "application/json", ...authHeaders() } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error || `${res.status} ${res.statusText}`);
  return body;
}

// follow opens the event stream and calls load each time it connects:
// the server subscribes before it answers, and the stream has no replay,
// so what load reads then is never older than the events that follow.
// Statuses come only from load and the stream, in that order; the answer
// to a command is not used, as it may arrive after a newer event.
function follow(query, onEvent, load) {
  if (stream) stream.close();
  return new Promise((resolve, reject) => {
    stream = new EventSource(api + "/events" + query);
    stream.onmessage = (m) => onEvent(JSON.parse(m.data));
    stream.onopen = () => {
      $("#live").textContent = "";
      load().then(resolve, (err) => { showError(err); reject(err); });
    };
    // EventSource reconnects by itself; until then the page is stale.
    stream.onerror = () => { $("#live").textContent = "connection to sluice lost; reconnecting…"; };
  });
}

// bar draws the split: stable from the left, then the baseline (Kubernetes
// mode, when there is one), canary from the right.
function bar(w, big) {
  const c = Math.max(0, Math.min(100, w.canary)), b = Math.max(0, Math.min(100 - c, w.baseline || 0));
  const label = `stable ${w.stable}%, canary ${w.canary}%` + (b ? `, baseline ${b}%` : "");
  return `<svg class="bar${big ? " big" : ""}" viewBox="0 0 100 10" preserveAspectRatio="none" role="img" ` +
    `aria-label="${label}"><rect class="stable" width="${100 - c - b}" height="10"/>` +
    `<rect class="baseline" x="${100 - c - b}" width="${b}" height="10"/>` +
    `<rect class="canary" x="${100 - c}" width="${c}" height="10"/></svg>`;
}

const split = (w) => `${w.stable}/${w.canary}` + (w.baseline ? `/${w.baseline}` : "");

const stepText = (s) => s.stepCount ? `${Math.min(s.stepIndex + 1, s.stepCount)}/${s.stepCount}` : "-";

// age writes how long ago an RFC 3339 time was, as kubectl does (42s, 5m,
// 3h, 2d, 1y); "—" when unknown. The server sends times, never ages, so
// the page ages them itself (ageing() below keeps them current).
function ageText(ts) {
  const t = Date.parse(ts || "");
  if (isNaN(t)) return "—";
  const s = Math.max(0, Math.floor((Date.now() - t) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  if (s < 365 * 86400) return `${Math.floor(s / 86400)}d`;
  return `${Math.floor(s / (365 * 86400))}y`;
}
const age = (ts) => ts ? `<time class="age" datetime="${esc(ts)}" title="${esc(new Date(ts).toLocaleString())}">${ageText(ts)}</time>` : "—";

// ageing refreshes every age shown, once a few seconds.
setInterval(() => {
  for (const el of document.querySelectorAll("time.age")) el.textContent = ageText(el.getAttribute("datetime"));
}, 5000);

// ---- list view ----

const list = { items: new Map(), ns: "", phase: "", pending: false };

async function showList() {
  const q = new URLSearchParams(location.hash.split("?")[1] || "");
  list.ns = q.get("namespace") || "";
  list.phase = q.get("phase") || "";
  list.items = new Map();
  $("#main").innerHTML = `<h1>Rollouts</h1>
<div class="filters" role="search">
  <label>Namespace <select id="f-ns"></select></label>
  <label>Phase <select id="f-phase"><option value="">all</option>${
    ["Progressing", "Paused", "Healthy", "Degraded"].map((p) => `<option>${p}</option>`).join("")}</select></label>
  <span id="count" class="note" role="status"></span>
</div>
<div class="wrap"><table class="list"><thead><tr><th scope="col">Rollout</th><th scope="col">Phase</th>
<th scope="col">Step</th><th scope="col">Weights</th><th scope="col">Stable</th><th scope="col">Canary</th>
<th scope="col">Age</th></tr></thead><tbody id="rows"></tbody></table></div>`;
  $("#f-phase").value = list.phase;
  $("#f-ns").onchange = $("#f-phase").onchange = () => {
    const p = new URLSearchParams();
    if ($("#f-ns").value) p.set("namespace", $("#f-ns").value);
    if ($("#f-phase").value) p.set("phase", $("#f-phase").value);
    history.replaceState(null, "", "#/" + (p.size ? "?" + p : ""));
    list.ns = $("#f-ns").value; list.phase = $("#f-phase").value;
    renderRows();
  };
  await follow("", (e) => {
    if (!e.status) return;
    list.items.set(`${e.namespace}/${e.name}`, e.status);
    if (!list.pending) { list.pending = true; requestAnimationFrame(() => { list.pending = false; renderRows(); }); }
  }, async () => {
    const body = await getJSON("/rollouts");
    list.items = new Map(body.items.map((s) => [`${s.namespace}/${s.name}`, s]));
    renderRows();
    // Marks a complete render, for the render-time measurement.
    performance.mark("sluice-list-rendered");
  });
}

function renderRows() {
  const spaces = [...new Set([...list.items.values()].map((s) => s.namespace))].sort();
  $("#f-ns").innerHTML = `<option value="">all</option>` + spaces.map((n) => `<option>${esc(n)}</option>`).join("");
  $("#f-ns").value = list.ns;
  const shown = [...list.items.values()]
    .filter((s) => (!list.ns || s.namespace === list.ns) && (!list.phase || s.phase === list.phase))
    .sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name));
  $("#rows").innerHTML = shown.map((s) => `<tr data-key="${esc(s.namespace + "/" + s.name)}">
<td data-label="Rollout"><a href="#/r/${encodeURIComponent(s.namespace)}/${encodeURIComponent(s.name)}">${esc(s.namespace)}/${esc(s.name)}</a></td>
<td data-label="Phase" class="phase ${esc(s.phase)}">${esc(s.phase || "-")}${s.aborted ? " (aborted)" : ""}</td>
<td data-label="Step">${stepText(s)}</td>
<td data-label="Weights" class="weights">${bar(s.weights)} ${split(s.weights)}</td>
<td data-label="Stable">${esc(s.stableVersion || "-")}</td>
<td data-label="Canary">${esc(s.canaryVersion || "-")}</td>
<td data-label="Age">${age(s.createdAt)}</td></tr>`).join("");
  $("#count").textContent = `${shown.length} of ${list.items.size} rollouts`;
}

// ---- one rollout ----

const one = { key: "", status: null, events: [], message: null, poll: 0, refetch: 0 };

// The xDS clients are only in the status of one rollout as read (not in
// events, and they change without one): read again every few seconds and
// shortly after each status event.
const clientsEvery = 5000;

async function refreshClients() {
  const key = one.key;
  const st = await getJSON(`/rollouts/${key}`).catch(() => null);
  if (!st || key !== one.key || !one.status || !location.hash.startsWith("#/r/")) return;
  if (JSON.stringify(st.traffic.clients) === JSON.stringify(one.status.traffic.clients) &&
      st.traffic.clientCount === one.status.traffic.clientCount) return;
  one.status.traffic.clients = st.traffic.clients;
  one.status.traffic.clientCount = st.traffic.clientCount;
  renderRollout();
}

async function showRollout(ns, name) {
  one.key = `${encodeURIComponent(ns)}/${encodeURIComponent(name)}`;
  one.message = null;
  one.status = null;
  one.events = [];
  clearInterval(one.poll);
  one.poll = setInterval(refreshClients, clientsEvery);
  await follow("?rollout=" + encodeURIComponent(`${ns}/${name}`), (e) => {
    one.events.push(e);
    if (one.events.length > 50) one.events.shift();
    if (e.status) {
      const t = one.status && one.status.traffic;
      one.status = e.status;
      if (t && !e.status.traffic.clients) {
        one.status.traffic.clients = t.clients;
        one.status.traffic.clientCount = t.clientCount;
      }
      clearTimeout(one.refetch);
      one.refetch = setTimeout(refreshClients, 300);
    }
    if (one.status) renderRollout();
  }, async () => {
    const [st, ev] = await Promise.all([getJSON(`/rollouts/${one.key}`), getJSON(`/rollouts/${one.key}/events`)]);
    one.status = st;
    one.events = ev.items;
    renderRollout();
  });
}

function renderRollout() {
  const s = one.status;
  const focused = document.activeElement && document.activeElement.id;
  $("#main").innerHTML = `<p><a href="#/">← All rollouts</a></p>
<h1>${esc(s.namespace)}/${esc(s.name)} <span class="phase ${esc(s.phase)}" id="phase">${esc(s.phase)}</span></h1>
<p id="message">${esc(s.message)}</p>
<section aria-labelledby="h-actions"><h2 id="h-actions">Actions</h2>${actions(s)}</section>
<section aria-labelledby="h-traffic"><h2 id="h-traffic">Traffic</h2>${traffic(s)}${clients(s)}</section>
<section aria-labelledby="h-steps"><h2 id="h-steps">Steps</h2>${steps(s)}</section>
${routes(s)}${replicaSets(s)}
<section aria-labelledby="h-analysis"><h2 id="h-analysis">Analysis</h2>${analysis(s)}</section>
${loadErrors(s)}
<section aria-labelledby="h-events"><h2 id="h-events">Events</h2>${events()}</section>`;
  for (const b of document.querySelectorAll("button[data-verb]")) b.onclick = () => command(b.dataset.verb);
  if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
}

function actions(s) {
  const why = server.tokenRequired && !token() ? "Enter the API token above: this server requires it for commands." : "";
  const buttons = verbs.map((v) =>
    `<button type="button" id="do-${v}" data-verb="${v}"${why ? ` disabled aria-describedby="why-disabled"` : ""}>${v}</button>`).join("");
  const msg = one.message ? `<p class="msg ${one.message.ok ? "ok" : "err"}">${esc(one.message.text)}</p>` : "";
  return `<div class="actions">${buttons}</div>${why ? `<p id="why-disabled" class="note">${why}</p>` : ""}
<div id="result" role="status" aria-live="polite">${msg}</div>`;
}

async function command(verb) {
  const s = one.status;
  if (!confirm(`${verb} ${s.namespace}/${s.name}?`)) return;
  const headers = { ...clientHeader, ...authHeaders() };
  try {
    const res = await fetch(`${api}/rollouts/${one.key}/${verb}`, { method: "POST", headers });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(`${verb} refused (${res.status}): ${body.error || res.statusText}`);
    one.message = { ok: true, text: `${verb}: done` };
  } catch (err) {
    one.message = { ok: false, text: err.message };
  }
  renderRollout();
}

function traffic(s) {
  const t = s.traffic || {};
  let ack = "ACKed by every connected xDS client";
  if (!t.acked) ack = `waiting for the xDS clients to ACK push ${t.generation} (last ACKed: ${t.ackedGeneration})`;
  if (t.ackTimedOut) ack += "; an earlier step went on without its ACK";
  return `${bar(s.weights, true)}
<dl class="kv"><dt>Declared</dt><dd id="weights">stable ${s.weights.stable}% · canary ${s.weights.canary}%${
  s.weights.baseline ? ` · baseline ${s.weights.baseline}% (stable version)` : ""}</dd>
<dt>xDS clients</dt><dd id="ack">${esc(ack)}</dd>
<dt>Stable</dt><dd>${esc(s.stableVersion || "-")}</dd>
<dt>Canary</dt><dd>${esc(s.canaryVersion || "-")}${s.aborted ? " (aborted)" : ""}</dd>
<dt>Commit</dt><dd><code>${esc(s.commit || "-")}</code></dd>${waves(s)}
<dt>Age</dt><dd id="age">${age(s.createdAt)}${s.phaseSince ? `; ${esc(s.phase)} for ${age(s.phaseSince)}` : ""}</dd></dl>`;
}

// waves is a multi-cluster rollout's part: its cluster, its wave and why,
// and where the whole rollout is.
function waves(s) {
  const w = s.wave;
  if (!w) return "";
  return `
<dt>Cluster</dt><dd id="wave">${esc(w.cluster)}, wave ${w.wave}/${w.waves}${w.reason ? ` (${esc(w.reason)})` : ""}</dd>
<dt>Waves</dt><dd id="program">${esc(w.program || "-")}</dd>`;
}

// clients is the table of the xDS clients connected to this sluice that
// hold the rollout's host, with what each ACKed.
function clients(s) {
  const list = s.traffic && s.traffic.clients;
  if (!list) return "";
  if (!list.length) return `<p class="note" id="clients-none">No xDS client of this rollout is connected to this sluice.</p>`;
  const total = Math.max(s.traffic.clientCount || 0, list.length);
  const caption = total > list.length ? `xDS clients: ${list.length} of ${total}, those without the current routes first` : `xDS clients (${total})`;
  return `<div class="wrap"><table id="clients" class="clients"><caption>${esc(caption)}</caption>
<thead><tr><th scope="col">Node</th><th scope="col">Locality</th><th scope="col">Transport</th><th scope="col">ACKed version</th>
<th scope="col">Current</th><th scope="col">NACK</th></tr></thead><tbody>${list.map((c) => `<tr class="${c.current ? "current" : "behind"}">
<th scope="row" data-label="Node">${esc(c.node || "-")}</th><td data-label="Locality">${esc(c.locality || "-")}</td>
<td data-label="Transport">${esc(c.transport)}</td><td data-label="ACKed version">${esc(c.version || "-")}</td>
<td data-label="Current" class="cur">${c.current ? "yes" : "no"}</td><td data-label="NACK">${esc(c.nack || "-")}</td></tr>`).join("")}</tbody></table></div>`;
}

function steps(s) {
  if (!s.steps || !s.steps.length) return `<p class="note">No steps.</p>`;
  return `<ol class="steps">${s.steps.map((st, i) => `<li class="${esc(st.state)}"${
    st.state === "current" || st.state === "held" ? ' aria-current="step"' : ""}><span class="state">${esc(st.state)}</span> ${i + 1}. ${esc(st.name)}${
    st.reason ? ` — <span class="reason">${esc(st.reason)}</span>` : ""}</li>`).join("")}</ol>`;
}

function match(m) {
  const v = m.headerValue || {};
  if (v.exact) return `${m.headerName} = "${v.exact}"`;
  if (v.prefix) return `${m.headerName} starts with "${v.prefix}"`;
  if (v.regex) return `${m.headerName} ~ /${v.regex}/`;
  return `${m.headerName || m.method || "request"} present`;
}

// routeMatch describes one match of a mirror route: method, path, headers.
function routeMatch(m) {
  const sm = (v) => v.exact ? `= "${v.exact}"` : v.prefix ? `starts with "${v.prefix}"` : v.regex ? `~ /${v.regex}/` : "present";
  const parts = [];
  if (m.method) parts.push("method " + sm(m.method));
  if (m.path) parts.push("path " + sm(m.path));
  for (const k of Object.keys(m.headers || {}).sort()) parts.push(`${k} ${sm(m.headers[k])}`);
  return parts.join(" and ") || "all requests";
}

function routes(s) {
  const hr = s.headerRoutes || [], mr = s.mirrorRoutes || [];
  if (!hr.length && !mr.length) return "";
  return `<section aria-labelledby="h-routes"><h2 id="h-routes">Routes to the canary</h2><ul>${
    hr.map((r) => `<li><strong>${esc(r.name)}</strong>: ${esc((r.match || []).map(match).join(" and "))}</li>`).join("")}${
    mr.map((r) => `<li><strong>${esc(r.name)}</strong> (mirror): ${r.percentage}% of ${
      esc((r.match || []).map(routeMatch).join(", or ") || "all requests")}</li>`).join("")}</ul></section>`;
}

function replicaSets(s) {
  if (!s.replicaSets || !s.replicaSets.length) return "";
  return `<section aria-labelledby="h-rs"><h2 id="h-rs">ReplicaSets</h2><div class="wrap"><table><thead><tr>
<th scope="col">Name</th><th scope="col">Role</th><th scope="col">Version</th><th scope="col">Desired</th><th scope="col">Ready</th><th scope="col">Waiting</th></tr></thead><tbody>${
    s.replicaSets.map((r) => `<tr><td>${esc(r.name)}</td><td>${esc(r.role)}</td><td>${esc(r.version)}</td><td>${r.desired}</td><td>${r.ready}</td><td>${
      r.pending ? esc(`${r.pending} pending${r.unschedulable ? ": " + r.unschedulable : ""}`) : ""}</td></tr>`).join("")}</tbody></table></div></section>`;
}

function analysis(s) {
  if (!s.analysisRuns.length) return `<p class="note">No analysis runs for this version.</p>`;
  return s.analysisRuns.map((r) => `<div class="run" data-run="${esc(r.name)}"><h3>${esc(r.name)}: <span class="${
    r.phase === "Successful" ? "Healthy" : r.phase === "Failed" || r.phase === "Error" ? "Degraded" : ""}">${esc(r.phase)}</span></h3>
${r.message ? `<p class="verdict">${esc(r.message)}</p>` : ""}
${r.metrics.map((m) => `<div class="metric">${plot(m)}<div class="verdict"><strong>${esc(m.name)}</strong>: ${esc(m.phase)}, latest ${esc(m.value || "-")}
${m.message ? `<br>${esc(m.message)}` : ""}${m.successCondition ? `<br>success when <code>${esc(m.successCondition)}</code>` : ""}${
      m.failureCondition ? `<br>failure when <code>${esc(m.failureCondition)}</code>` : ""}</div></div>`).join("")}</div>`).join("");
}

// threshold takes the number a condition compares result with, such as
// 0.95 in "len(result) > 0 && result[0] >= 0.95": the last comparison
// with a number. Conditions are expressions; a line is drawn only when
// one has this simple shape.
function threshold(cond) {
  const found = [...String(cond || "").matchAll(/(?:>=|<=|>|<)\s*(-?\d+(?:\.\d+)?(?:e-?\d+)?)/gi)];
  return found.length ? Number(found[found.length - 1][1]) : null;
}

// value reads a measurement: a number, or the first of a vector "[0.9]".
function value(text) {
  const m = /-?\d+(?:\.\d+)?(?:e-?\d+)?/i.exec(text || "");
  return m ? Number(m[0]) : null;
}

function plot(m) {
  const pts = (m.measurements || []).map((x) => ({ v: value(x.value), phase: x.phase, time: x.time })).filter((p) => p.v !== null);
  const succ = threshold(m.successCondition), fail = threshold(m.failureCondition);
  if (!pts.length) return `<p class="note">No numeric measurements yet.</p>`;
  const W = 320, H = 140, pad = 24;
  const vals = pts.map((p) => p.v).concat([succ, fail].filter((v) => v !== null));
  let lo = Math.min(...vals), hi = Math.max(...vals);
  if (hi === lo) { hi += 1; lo -= 1; }
  const margin = (hi - lo) * 0.1; // keep points off the frame
  hi += margin; lo -= margin;
  const x = (i) => pad + (pts.length === 1 ? (W - 2 * pad) / 2 : (i * (W - 2 * pad)) / (pts.length - 1));
  const y = (v) => H - pad - ((v - lo) * (H - 2 * pad)) / (hi - lo);
  const hline = (v, cls, label) => v === null ? "" :
    `<line class="${cls}" x1="${pad}" x2="${W - pad}" y1="${y(v)}" y2="${y(v)}"/><text x="${W - pad}" y="${y(v) - 3}" text-anchor="end">${label} ${v}</text>`;
  const desc = `${m.name}: ${pts.map((p) => `${p.v} (${p.phase})`).join(", ")}` +
    (succ !== null ? `; success line ${succ}` : "") + (fail !== null ? `; failure line ${fail}` : "");
  return `<svg class="plot" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(desc)}">
<text x="2" y="${y(hi) + 4}">${+hi.toPrecision(3)}</text><text x="2" y="${y(lo)}">${+lo.toPrecision(3)}</text>
${hline(succ, "succ", "success")}${hline(fail, "fail", "failure")}
<polyline class="line" points="${pts.map((p, i) => `${x(i)},${y(p.v)}`).join(" ")}"/>
${pts.map((p, i) => `<circle class="pt-${esc(p.phase)}" cx="${x(i)}" cy="${y(p.v)}" r="4"><title>${esc(`${p.time}: ${p.v} ${p.phase}`)}</title></circle>`).join("")}
</svg>`;
}

function loadErrors(s) {
  if (!s.errors.length) return "";
  return `<section aria-labelledby="h-err"><h2 id="h-err">Load errors</h2><ul>${s.errors.map((e) =>
    `<li>${esc(`${e.file}${e.line ? ":" + e.line : ""}: ${e.field ? e.field + ": " : ""}${e.message}`)}</li>`).join("")}</ul></section>`;
}

// events lists the latest events first; the daemon may publish the same
// status twice, so an event saying what the one before it said is left out.
function events() {
  const shown = one.events.filter((e, i, all) => i === 0 || e.type !== all[i - 1].type || e.message !== all[i - 1].message);
  if (!shown.length) return `<p class="note">No events yet.</p>`;
  return `<ul class="events" aria-live="polite">${shown.slice(-20).reverse().map((e) =>
    `<li><time datetime="${esc(e.time)}">${esc(new Date(e.time).toLocaleTimeString())}</time> <strong>${esc(e.type)}</strong> ${esc(e.message)}</li>`).join("")}</ul>`;
}

// ---- token and routing ----

function showTokenState() {
  const note = $("#token-note");
  if (token()) note.textContent = "token set for this tab";
  else if (server.readTokenRequired) note.textContent = "this server needs a token to show rollouts";
  else note.textContent = server.tokenRequired ? "commands need a token" : "this server takes commands without a token";
}

// needsToken: this server's reads need a token and the tab has none.
const needsToken = () => server.readTokenRequired && !token();

function showNeedToken() {
  if (stream) { stream.close(); stream = null; }
  $("#main").innerHTML = `<h1>Rollouts</h1><p class="msg err" id="need-token" role="alert">This server needs the API token to show rollouts: enter it above (the read token or the write token).</p>`;
}

function showError(err) {
  $("#main").innerHTML = `<p class="msg err" role="alert">${esc(err.message)}</p><p><a href="#/">All rollouts</a></p>`;
}

async function route() {
  clearInterval(one.poll);
  clearTimeout(one.refetch);
  if (needsToken()) return showNeedToken();
  const m = /^#\/r\/([^/]+)\/([^/?]+)/.exec(location.hash);
  if (m) await showRollout(decodeURIComponent(m[1]), decodeURIComponent(m[2])).catch(() => {});
  else await showList().catch(() => {});
}

async function start() {
  server = await getJSON("/info").catch(() => server);
  $("#token").value = token();
  $("#token-form").onsubmit = (e) => {
    e.preventDefault();
    keepToken($("#token").value.trim());
    showTokenState();
    // Reads that needed the token can start now.
    if (server.readTokenRequired) route();
    else if (one.status && location.hash.startsWith("#/r/")) renderRollout();
  };
  $("#token-clear").onclick = () => {
    keepToken("");
    $("#token").value = "";
    showTokenState();
    if (server.readTokenRequired) route();
    else if (one.status && location.hash.startsWith("#/r/")) renderRollout();
  };
  showTokenState();
  window.onhashchange = route;
  await route();
}

start();

/// The status page for people (`GET /`): plain HTML, CSS and JavaScript shipped in the
/// binary, no build step. The page itself holds no data, so it is served without the
/// bearer token; it asks for the token (kept in sessionStorage) and uses it for
/// `/v1/queue` and `/v1/events`, read with fetch so the header can be sent.
enum StatusPage {
    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Kiln</title>
<style>
  :root { --fg:#1d2330; --muted:#667085; --line:#e4e7ec; --accent:#d9480f; --ok:#2b8a3e; --bad:#c92a2a; }
  body { font: 14px/1.45 system-ui, sans-serif; color: var(--fg); margin: 0; background: #fafafa; }
  header { display:flex; align-items:baseline; gap:1rem; padding: .8rem 1.5rem; background:#fff; border-bottom:1px solid var(--line); }
  header h1 { margin:0; font-size:1.2rem; color: var(--accent); }
  header .muted { color: var(--muted); }
  main { padding: 1rem 1.5rem; display:grid; gap:1rem; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); }
  section { background:#fff; border:1px solid var(--line); border-radius:8px; padding: .8rem 1rem; }
  h2 { font-size: 1rem; margin: 0 0 .6rem; }
  table { width:100%; border-collapse: collapse; }
  td, th { text-align:left; padding: .3rem .4rem; border-bottom: 1px solid var(--line); vertical-align: top; }
  th { color: var(--muted); font-weight: 500; }
  .bar { background: var(--line); border-radius: 4px; height: 10px; width: 100%; min-width: 120px; }
  .bar > div { background: var(--accent); height: 100%; border-radius: 4px; transition: width .4s; }
  .counts { display:flex; flex-wrap: wrap; gap: .5rem; }
  .count { border:1px solid var(--line); border-radius: 6px; padding: .3rem .6rem; }
  .count b { font-size: 1.1rem; }
  .bad { color: var(--bad); } .ok { color: var(--ok); } .muted { color: var(--muted); }
  code { font-size: 12px; }
  #auth { display:none; gap:.5rem; }
</style>
</head>
<body>
<header><h1>Kiln</h1><span class="muted" id="updated">connecting…</span>
  <form id="auth"><input id="token" type="password" placeholder="bearer token"><button>Use token</button></form></header>
<main>
  <section><h2>Queue</h2><div class="counts" id="counts"></div><p class="muted" id="slots"></p></section>
  <section><h2>Running</h2><table><thead><tr><th>artifact</th><th>source</th><th>kind</th><th>progress</th><th>speed</th><th>ETA</th></tr></thead>
    <tbody id="running"></tbody></table></section>
  <section><h2>Waiting</h2><table><thead><tr><th>artifact</th><th>source</th><th>kind</th><th>priority</th><th>state</th><th>why</th></tr></thead>
    <tbody id="queued"></tbody></table></section>
  <section><h2>Recent failures</h2><table><thead><tr><th>artifact</th><th>source</th><th>error</th><th>when</th></tr></thead>
    <tbody id="failures"></tbody></table></section>
  <section><h2>Storage</h2><div id="storage"></div></section>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({"&":"&amp;","<":"&lt;",">":"&gt;","\"":"&quot;"}[c]));
const bytes = (n) => n == null ? "?" : n < 1e6 ? (n/1e3).toFixed(1)+" kB" : n < 1e9 ? (n/1e6).toFixed(1)+" MB" : (n/1e9).toFixed(2)+" GB";
const progress = {};   // artifact id -> live progress from the event stream
function headers() { const t = sessionStorage.getItem("kiln-token"); return t ? { Authorization: "Bearer " + t } : {}; }
function needToken() { $("auth").style.display = "flex"; $("updated").textContent = "this Kiln needs a token"; }
$("auth").addEventListener("submit", (e) => { e.preventDefault(); sessionStorage.setItem("kiln-token", $("token").value);
  $("auth").style.display = "none"; refresh(); listen(); });

function bar(p) {
  const f = p ? Math.max(0, Math.min(1, p.fraction ?? 0)) : 0;
  return `<div class="bar" data-fraction="${f.toFixed(3)}"><div style="width:${(f*100).toFixed(1)}%"></div></div>`;
}
// The source's file name (the whole path on hover): how an operator knows the film.
function film(path) {
  const name = (path ?? "").split("/").pop();
  return `<td title="${esc(path ?? "")}">${esc(name)}</td>`;
}
function render(q) {
  $("counts").innerHTML = Object.entries(q.counts).map(([k, v]) => `<span class="count">${esc(k)} <b>${v}</b></span>`).join("");
  $("slots").textContent = Object.entries(q.slots).map(([k, s]) => `${k}: ${s.busy}/${s.total} busy`).join(" · ");
  $("running").innerHTML = q.running.map((j) => {
    const p = progress[j.artifact_id] ?? j.progress;
    return `<tr data-artifact="${esc(j.artifact_id)}"><td><code>${esc(j.artifact_id)}</code></td>${film(j.source)}<td>${esc(j.kind)}</td>
      <td>${bar(p)}</td><td>${p ? p.speed.toFixed(1)+"×" : ""}</td><td>${p && p.eta_seconds != null ? Math.round(p.eta_seconds)+" s" : ""}</td></tr>`;
  }).join("") || `<tr><td colspan="6" class="muted">nothing running</td></tr>`;
  $("queued").innerHTML = q.queued.map((j) => `<tr><td><code>${esc(j.artifact_id)}</code></td>${film(j.source)}<td>${esc(j.kind)}</td>
      <td>${esc(j.priority)}</td><td>${esc(j.state)}</td><td>${esc(j.waiting_reason ?? "")}</td></tr>`).join("")
      || `<tr><td colspan="6" class="muted">nothing waiting</td></tr>`;
  $("failures").innerHTML = q.recent_failures.map((f) => `<tr><td><code>${esc(f.artifact_id)}</code></td>${film(f.source)}
      <td class="bad">${esc(f.error?.code)}: ${esc(f.error?.message)}</td><td>${esc(f.at)}</td></tr>`).join("")
      || `<tr><td colspan="4" class="muted">no failures</td></tr>`;
  const s = q.storage;
  $("storage").innerHTML = `<p>${bytes(s.stored_bytes)} stored, ${bytes(s.unreferenced_bytes)} unreferenced,
      ${bytes(s.free_bytes)} free${s.budget_bytes ? `, budget ${bytes(s.budget_bytes)}` : ""}</p>`;
  $("updated").textContent = "updated " + new Date().toLocaleTimeString();
}
let last = null;
async function refresh() {
  try {
    const r = await fetch("v1/queue", { headers: headers() });
    if (r.status === 401) return needToken();
    last = await r.json(); render(last);
  } catch (e) { $("updated").textContent = "cannot reach Kiln"; }
}
async function listen() {
  // EventSource cannot send a bearer token, so read the stream with fetch.
  try {
    const r = await fetch("v1/events", { headers: headers() });
    if (r.status === 401) return needToken();
    const reader = r.body.getReader(), dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i); buf = buf.slice(i + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
        if (!data) continue;
        const e = JSON.parse(data);
        if (e.type === "artifact.progress") { progress[e.artifact_id] = e.progress; if (last) render(last); }
        else { delete progress[e.artifact_id]; refresh(); }
      }
    }
  } catch (e) { /* reconnect below */ }
  setTimeout(listen, 2000);
}
refresh(); listen(); setInterval(refresh, 5000);
</script>
</body>
</html>
"""#
}

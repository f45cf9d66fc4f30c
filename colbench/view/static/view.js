// colbench view: the runs index and the episodes table. Every value is put in the page as text (textContent),
// never as markup. Served mode polls the server's JSON; a bundle opened from disk reads its data from <script>
// files (file:// pages may not fetch) and filters them here.
"use strict";
(function () {
  const body = document.body;
  const bundle = body.dataset.mode === "bundle";
  const POLL_MS = 2000;

  function cell(row, value, cls) {
    const td = document.createElement("td");
    if (value instanceof Node) td.appendChild(value); else td.textContent = value;
    if (cls) td.className = cls;
    row.appendChild(td);
    return td;
  }
  function link(href, text) {
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    return a;
  }
  function num(v, digits) { return v === null || v === undefined ? "–" : Number(v).toFixed(digits); }
  function pct(v) { return v === null || v === undefined ? "–" : (100 * v).toFixed(1) + "%"; }
  function estimate(e, asPct) {
    if (!e || e.value === null) return "–";
    const f = asPct ? pct : (v) => num(v, 3);
    return e.low !== null && e.high !== null ? f(e.value) + " [" + f(e.low) + ", " + f(e.high) + "]" : f(e.value);
  }

  // -- runs index --------------------------------------------------------------------------------------------
  function drawRuns(runs) {
    const tbody = document.querySelector("#runs tbody");
    tbody.replaceChildren();
    for (const r of runs) {
      const tr = document.createElement("tr");
      tr.dataset.run = r.id;
      cell(tr, link(r.href, r.label));
      cell(tr, r.env_id);
      cell(tr, r.agent);
      cell(tr, r.simulator);
      cell(tr, r.leak_policy);
      cell(tr, r.truth_policy);
      cell(tr, r.done + " / " + (r.total === null ? "?" : r.total), "done");
      cell(tr, String(r.infra));
      cell(tr, r.success === null ? "n/a" : estimate(r.success, true));
      cell(tr, estimate(r.reward, false) + " " + r.reward_name);
      cell(tr, r.pass_k.map((p) => "^" + p[0] + " " + pct(p[1])).join(" · ") || "–");
      cell(tr, r.leak === null ? "–" : estimate(r.leak, true));
      cell(tr, r.untrue === null ? "–" : estimate(r.untrue, true) + " (" + r.untrue_replies + " replies)");
      cell(tr, r.failed_untrue === null ? "–" : r.failed_untrue[0] + "/" + r.failed_untrue[1] +
        (r.failed_untrue[1] ? " (" + pct(r.failed_untrue[0] / r.failed_untrue[1]) + ")" : ""));
      cell(tr, String(r.tokens));
      cell(tr, r.cost === null ? "unknown price" : "$" + num(r.cost, 4));
      const notes = [];
      if (r.not_comparable.length) notes.push("not comparable with " + r.not_comparable.join(", ") + " (other env version)");
      if (r.torn_line) notes.push("torn last line ignored");
      if (r.stale) notes.push("statistics catching up with the newest episodes");
      notes.push(...r.missing);
      cell(tr, notes.join("; "), "notes");
      const cmp = document.createElement("span");
      for (const c of r.compare) { cmp.appendChild(link(c.href, "vs " + c.label)); cmp.appendChild(document.createTextNode(" ")); }
      cell(tr, cmp);
      tbody.appendChild(tr);
    }
  }

  if (document.getElementById("runs")) {
    if (bundle) {
      drawRuns(window.COLBENCH_RUNS || []);
    } else {
      const load = () => fetch(body.dataset.api, { cache: "no-store" }).then((r) => r.json()).then(drawRuns).catch(() => {});
      load();
      setInterval(load, POLL_MS);
    }
  }

  // -- episodes table ----------------------------------------------------------------------------------------
  const table = document.getElementById("episodes");
  if (!table) return;
  const form = document.getElementById("filters");
  const size = Number(body.dataset.size) || 50;
  let page = 0;

  function outcome(r) {
    if (r.status !== "ok") return ["infra error", "infra"];
    if (r.failed === null) return ["n/a", ""];
    return r.failed ? ["failed", "fail"] : ["success", "pass"];
  }
  function drawRows(data) {
    const tbody = table.querySelector("tbody");
    tbody.replaceChildren();
    for (const r of data.rows) {
      const tr = document.createElement("tr");
      const [word, cls] = outcome(r);
      tr.className = cls;
      cell(tr, link(r.href, r.task_id));
      cell(tr, String(r.trial));
      cell(tr, r.status === "ok" ? word : word + ": " + (r.error || ""));
      cell(tr, num(r.reward, 3));
      cell(tr, r.turns === null ? "?" : String(r.turns));
      cell(tr, r.leaks === null ? "–" : String(r.leaks), r.leaks > 0 ? "leaked" : "");
      cell(tr, r.untrue === null || r.untrue === undefined ? "–" : r.untrue + "/" + r.checked, r.untrue > 0 ? "untrue" : "");
      cell(tr, String(r.tokens));
      cell(tr, r.cost === null ? "?" : "$" + num(r.cost, 5));
      cell(tr, r.termination || "");
      cell(tr, String(r.attempts));
      tbody.appendChild(tr);
    }
    const pages = Math.max(1, Math.ceil(data.total / size));
    document.getElementById("count").textContent = data.total + " episodes match";
    document.getElementById("pageno").textContent = "page " + (page + 1) + " of " + pages;
    document.getElementById("prev").disabled = page === 0;
    document.getElementById("next").disabled = page + 1 >= pages;
    const done = document.getElementById("done");
    if (done && data.done !== undefined) done.textContent = String(data.done);
  }
  function query() {
    const q = new URLSearchParams();
    for (const box of form.querySelectorAll("input[name=filter]:checked")) q.append("filter", box.value);
    const search = form.querySelector("input[name=q]");
    if (search && search.value.trim()) q.set("q", search.value);
    q.set("sort", form.querySelector("select[name=sort]").value);
    if (form.querySelector("input[name=desc]").checked) q.set("desc", "1");
    q.set("page", String(page));
    q.set("size", String(size));
    return q;
  }

  // served: the server filters, sorts and pages
  function fetchPage() {
    return fetch(body.dataset.api + "?" + query().toString(), { cache: "no-store" })
      .then((r) => r.json()).then(drawRows).catch(() => {});
  }

  // bundle: every chunk of rows, loaded as scripts one at a time, then filtered here
  const all = [];
  function loadChunks(done) {
    const chunks = Number(body.dataset.chunks) || 0;
    let k = 0;
    window.colbenchChunk = function (index, rows) { all.push(...rows); };
    const next = () => {
      if (k >= chunks) { done(); return; }
      const s = document.createElement("script");
      s.src = body.dataset.api + k + ".js";
      k += 1;
      s.onload = next;
      document.body.appendChild(s);
    };
    next();
  }
  function localPage() {
    const q = query();
    const filters = q.getAll("filter");
    const failedEvery = new Map();
    for (const r of all) {
      if (r.status !== "ok") continue;
      failedEvery.set(r.task_id, (failedEvery.has(r.task_id) ? failedEvery.get(r.task_id) : true) && r.failed === true);
    }
    let rows = all.filter((r) => filters.every((f) =>
      f === "failed" ? r.failed === true :
      f === "failed_all" ? failedEvery.get(r.task_id) === true :
      f === "leaked" ? r.leaks > 0 :
      f === "untrue" ? r.untrue > 0 :
      f === "infra" ? r.status === "infra_error" : true));
    const key = q.get("sort");
    if (key !== "order") {
      const field = key === "task" ? "task_id" : key;
      rows = rows.slice().sort((a, b) => (a[field] < b[field] ? -1 : a[field] > b[field] ? 1 : a.trial - b.trial));
    }
    if (q.get("desc") === "1") rows.reverse();
    drawRows({ rows: rows.slice(page * size, (page + 1) * size), total: rows.length });
  }

  const refresh = bundle ? localPage : fetchPage;
  form.addEventListener("change", () => { page = 0; refresh(); });
  form.addEventListener("submit", (e) => { e.preventDefault(); page = 0; refresh(); });
  const search = form.querySelector("input[name=q]");
  if (search) search.addEventListener("input", () => { page = 0; refresh(); });
  document.getElementById("prev").addEventListener("click", () => { page = Math.max(0, page - 1); refresh(); });
  document.getElementById("next").addEventListener("click", () => { page += 1; refresh(); });
  if (bundle) {
    loadChunks(localPage);
  } else {
    fetchPage();
    setInterval(fetchPage, POLL_MS);
  }
})();

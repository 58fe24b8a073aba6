// locust-llm in Locust's web UI: the start form shows the experiment, the LLM tab shows it running and its
// verdict. Served by the plugin (locust_llm/runtime/webui.py); loads nothing from anywhere else. Every text
// that comes from the server is set as textContent; the only HTML inserted is the verdict cards, rendered and
// escaped by the report's own templates.
(function () {
  "use strict";

  const SVG = "http://www.w3.org/2000/svg";
  const POLL_MS = 1000;
  const camel = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
  // The form's custom options in groups, each with a label a planner reads (Locust's own is the option's name).
  const SECTIONS = [
    ["Experiment", [
      ["scenario", "Scenario"], ["variant", "Variants"],
      ["mode", "Mode: closed (concurrent streams) or open (arrival rate)"],
      ["ladder", "Ladder: load levels, comma list (streams, or req/s when open)"],
      ["step_duration", "Measured (steady) window per step, s"], ["warmup", "Warm-up per step, s (not measured)"],
      ["repeats", "Repeats of each level per variant"], ["order", "Order: sequential, or interleaved (ABBA blocks)"],
      ["min_requests", "Completed requests a window needs"]]],
    ["Requests", [
      ["prompt_tokens", "Prompt length, tokens"], ["max_tokens", "Output length, tokens"], ["api", "API"],
      ["model", "Model name to request (empty: the server's)"]]],
    ["Gates (exit code in a nightly job)", [
      ["slo_ttft_p99_ms", "SLO: TTFT P99 per step, ms (0: the scenario's)"],
      ["slo_tpot_p99_ms", "SLO: TPOT P99 per step, ms (0: the scenario's)"],
      ["slo_error_rate", "SLO: error rate per step, 0 to 1 (negative: the scenario's)"],
      ["max_regression_pct", "Worst change vs the baseline run, % (negative: the scenario's)"],
      ["baseline_run", "Saved baseline run to compare with"]]],
    ["Soak, probes and scale-out", [
      ["soak", "Soak: hold one level this long instead of the ladder (90s, 10m, 2h; empty: no)"],
      ["soak_level", "Soak level (0: the ladder's highest)"],
      ["probes", "Send the probe suite (abnormal inputs) after each variant's ladder"],
      ["scale_out", "Scale-out: after each variant's ladder, 1 server against this many (2 or more), same level "
        + "per server (0: off; -1: the scenario's)"]]],
    ["Cost", [["gpu_hour_usd", "Price of one GPU per hour, USD, for cost per million tokens (0: the scenario's)"]]],
    ["Run directory", [["run_id", "Run directory name (empty: time + scenario)"],
                       ["overwrite", "Replace a run directory of that name"]]],
  ];

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
    }
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    for (const child of children) node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    return node;
  }

  async function getJSON(url) {
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || response.statusText);
    return data;
  }

  function duration(seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return "?";
    seconds = Math.max(0, Math.round(seconds));
    if (seconds < 60) return `${seconds} s`;
    const minutes = Math.floor(seconds / 60);
    if (minutes < 60) return `${minutes} min ${seconds % 60} s`;
    return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
  }

  const fmt = (x, digits) => (x === null || x === undefined || !isFinite(x)) ? "–" : Number(x).toFixed(digits);
  const unitOf = (mode, level) => mode === "open" ? "req/s" : (Number(level) === 1 ? "user" : "users");

  // -- the start form ------------------------------------------------------------------------------------
  let form = null;       // the <form> shaped last
  let formInfo = (window.templateArgs || {}).llm_form || null;

  const input = (name) => form && form.querySelector(`[name="${camel(name)}"]`);
  const wrapperOf = (node) => node.closest(".MuiFormControl-root, .MuiFormControlLabel-root") || node.parentElement;

  function setValue(node, value) {
    if (node.type === "checkbox") {
      if (node.checked !== Boolean(value)) node.click();
      return;
    }
    const proto = node.tagName === "SELECT" ? HTMLSelectElement.prototype : HTMLInputElement.prototype;
    Object.getOwnPropertyDescriptor(proto, "value").set.call(node, value === null || value === undefined ? "" : String(value));
    node.dispatchEvent(new Event(node.tagName === "SELECT" ? "change" : "input", { bubbles: true }));
  }

  function shapeForm() {
    const found = document.querySelector("form");
    if (!found || found === form || !found.querySelector('[name="scenario"]')) return;
    form = found;
    for (const name of ["userCount", "spawnRate", "runTime"]) {
      const node = form.querySelector(`[name="${name}"]`);
      if (node) wrapperOf(node).style.display = "none";
    }
    const host = form.querySelector('[name="host"]');
    const plan = el("div", { id: "llm-plan-sentence", class: "llm-sentence" });
    const hostBox = host ? wrapperOf(host) : null;
    if (hostBox) hostBox.parentElement.insertBefore(plan, hostBox);
    const summary = [...form.querySelectorAll("button[aria-expanded]")].find((b) => b.textContent.includes("Custom parameters"));
    if (summary) {
      summary.querySelector("p").textContent = "Experiment (locust-llm)";
      if (summary.getAttribute("aria-expanded") === "false") summary.click();
    }
    orderFields();
    const variant = input("variant");
    if (variant) {
      wrapperOf(variant).style.display = "none";
      const box = el("fieldset", { id: "llm-variants", class: "llm-variants" });
      wrapperOf(variant).parentElement.insertBefore(box, wrapperOf(variant));
      box.style.order = wrapperOf(variant).style.order;
    }
    const scenario = input("scenario");
    if (scenario) scenario.addEventListener("change", () => loadScenario(scenario.value));
    form.addEventListener("input", describePlan);
    form.addEventListener("change", describePlan);
    showFormInfo(formInfo, false);
  }

  function orderFields() {
    // Locust lists custom options alphabetically; CSS order groups them without moving React's nodes, and
    // options this list does not know (another plugin's) follow at the end.
    const variant = input("variant");
    const parent = variant && wrapperOf(variant).parentElement;
    if (!parent) return;
    for (const child of parent.children) child.style.order = "1000";
    let position = 0;
    for (const [title, fields] of SECTIONS) {
      parent.appendChild(el("h4", { class: "llm-section", style: `order: ${++position}` }, title));
      for (const [name, label] of fields) {
        const node = input(name);
        if (!node) continue;
        const box = wrapperOf(node);
        box.style.order = String(++position);
        relabel(box, label);
      }
    }
  }

  function relabel(box, label) {
    const checkboxLabel = box.querySelector(".MuiFormControlLabel-label");
    if (checkboxLabel) checkboxLabel.textContent = label;
    for (const node of box.querySelectorAll(":scope > label, legend > span")) node.textContent = label;
  }

  async function loadScenario(path) {
    const note = document.getElementById("llm-plan-sentence");
    try {
      showFormInfo(await getJSON(`/llm/form?scenario=${encodeURIComponent(path)}`), true);
    } catch (error) {
      if (note) note.textContent = `This scenario cannot run: ${error.message}`;
    }
  }

  function showFormInfo(info, fill) {
    formInfo = info;
    if (!form || !info) return;
    if (info.error) {
      document.getElementById("llm-plan-sentence").textContent = `The scenario cannot run as given: ${info.error}`;
      return;
    }
    if (fill) {
      for (const [name, value] of Object.entries(info.fields)) {
        const node = input(name);
        if (node && name !== "scenario") setValue(node, value);
      }
    }
    const box = document.getElementById("llm-variants");
    if (box) {
      const chosen = new Set(String(info.fields.variant).split(",").filter(Boolean));
      box.replaceChildren(el("legend", {}, "Variants to run"));
      for (const name of info.variants) {
        const isBase = name === info.baseline;
        const tick = el("input", { type: "checkbox", value: name, "data-llm-variant": name,
                                   checked: isBase || chosen.has(name), disabled: isBase });
        tick.addEventListener("change", syncVariants);
        box.appendChild(el("label", { class: "llm-variant" }, tick, ` ${name}`, isBase ? el("small", {}, " baseline, always run") : null));
      }
      syncVariants();
    }
    describePlan();
  }

  function syncVariants() {
    const ticked = [...document.querySelectorAll("[data-llm-variant]")].filter((t) => t.checked).map((t) => t.value);
    const variant = input("variant");
    if (variant) setValue(variant, ticked.join(","));
  }

  function describePlan() {
    const note = document.getElementById("llm-plan-sentence");
    if (!note || !formInfo || formInfo.error) return;
    const value = (name) => (input(name) || {}).value || "";
    const levels = value("ladder").split(",").map((s) => s.trim()).filter(Boolean);
    const repeats = Math.max(parseInt(value("repeats"), 10) || 1, 1);
    const variants = value("variant").split(",").filter(Boolean);
    const perVariant = repeats * (levels.length + formInfo.contexts * (formInfo.context_levels || levels.length));
    const warmup = parseFloat(value("warmup")) || 0;
    const step = parseFloat(value("step_duration")) || 0;
    const mode = value("mode");
    const total = perVariant * variants.length;
    note.textContent = `No user count or ramp-up here: the ladder drives the load. ${variants.length} variant(s) `
      + `(${variants.join(", ")}) × ${perVariant} step(s) at ${levels.join(", ")} ${mode === "open" ? "req/s" : "concurrent streams"}`
      + `${repeats > 1 ? `, ${repeats} times over` : ""}; each step ${warmup} s warm-up + ${step} s measured `
      + `(longer when the window is short of requests or drifts): ${total} steps, about ${duration(total * (warmup + step))} `
      + `plus server starts. Server: ${formInfo.external_url || formInfo.engine}.`;
  }

  // -- the LLM tab ---------------------------------------------------------------------------------------
  const cockpit = el("div", { id: "llm-cockpit" });
  let live = null;
  let verdictFor = null;
  let polling = false;

  function llmTabSelected() {
    const tab = document.querySelector('[role="tab"][aria-selected="true"]');
    return Boolean(tab && tab.textContent.trim() === "LLM");
  }

  function mountCockpit() {
    const tabs = document.querySelector('[role="tablist"]');
    const shown = Boolean(tabs) && llmTabSelected();
    cockpit.style.display = shown ? "" : "none";
    if (!shown) return false;
    const bar = tabs.closest(".MuiBox-root");
    const container = bar && bar.parentElement;
    if (container && cockpit.parentElement !== container) container.insertBefore(cockpit, bar.nextSibling);
    return true;
  }

  async function poll() {
    if (polling) return;
    polling = true;
    try {
      if (mountCockpit()) {
        live = await getJSON("/llm/live");
        if (live.outcome && verdictFor !== live.run_id) {
          verdictFor = live.run_id;
          live.verdict = await getJSON("/llm/verdict");
          cockpit.verdict = live.verdict;
        } else if (!live.outcome) {
          verdictFor = null;
          cockpit.verdict = null;
        }
        drawCockpit(live, cockpit.verdict);
      }
    } catch (error) {
      cockpit.replaceChildren(el("p", { class: "llm-error" }, `Live view unavailable: ${error.message}`));
    } finally {
      polling = false;
    }
  }

  let drawn = null;

  function drawCockpit(data, verdict) {
    // Redrawn only when something changed: after the run the page stays still, so its links can be used.
    const key = JSON.stringify([data, verdict]);
    if (key === drawn && cockpit.childElementCount) return;
    drawn = key;
    if (!data.run_id) {
      cockpit.replaceChildren(el("p", { class: "llm-note" }, "No run yet: start one from the form."));
      return;
    }
    const parts = [progressView(data)];
    if (verdict) parts.push(verdictView(verdict));
    parts.push(chartsView(data), serverView(data), warningsView(data));
    cockpit.replaceChildren(...parts);
  }

  function progressView(data) {
    const p = data.progress;
    const phaseWords = { starting: "starting its server", warmup: "warming up (not measured)",
                         steady: "measuring the steady window", drain: "letting streams finish", idle: "idle" };
    const where = p.finished
      ? (p.interrupted ? "Stopped early: what was measured until then is kept." : "Run ended.")
      : `Running ${p.variant || "–"} at ${isFinite(p.level) && p.level !== null ? `${p.level} ${unitOf(data.mode, p.level)}` : "–"}`
        + `${p.context ? ` with ${p.context}-token prompts` : ""}: ${phaseWords[p.phase] || p.phase}`
        + `${p.extended_s ? ` (extended by ${p.extended_s} s)` : ""}.`;
    const fraction = p.steps ? Math.min(p.step / p.steps, 1) : 0;
    const grid = el("table", { class: "llm-plan" },
      el("tr", {}, el("th", {}, "variant"), ...data.ladder.map((l) => el("th", {}, `${l}`))),
      ...data.variants.map((v) => el("tr", {}, el("th", { style: `color: ${data.colors[v]}` }, v),
        ...data.ladder.map((l) => {
          const point = data.points.find((q) => q.variant === v && q.level === l);
          const now = !p.finished && p.variant === v && p.level === l;
          const state = now ? "now" : point ? (point.done ? "done" : "now") : "todo";
          return el("td", { class: `llm-${state}` }, now ? p.phase : point ? (point.done ? "done" : "…") : "");
        }))));
    return el("section", { id: "llm-progress", class: "llm-card" },
      el("h3", {}, `Run ${data.run_id}`, el("span", { class: "llm-sub" }, ` ${data.scenario} · ${data.engine}`)),
      el("p", { id: "llm-where" }, where),
      el("div", { class: "llm-bar" }, el("div", { style: `width: ${(100 * fraction).toFixed(1)}%` })),
      el("p", { id: "llm-left" }, p.finished ? `${p.step} of ${p.steps} steps measured.`
        : `Step ${p.step} of ${p.steps}: ${duration(p.step_left_s)} left in this step, about ${duration(p.run_left_s)} left in the run (server starts not counted).`),
      grid);
  }

  function verdictView(v) {
    const cards = el("div", { class: "llm-cards" });
    cards.innerHTML = v.html;  // the report's verdict template, autoescaped there
    const reasons = Object.entries(v.reasons || {}).flatMap(([code, list]) => list.map((r) => el("li", {}, `[exit ${code}] ${r}`)));
    const links = el("p", { class: "llm-links" },
      v.report ? el("a", { href: "/llm/report", target: "_blank" }, "HTML report") : "no report was written",
      " · ", el("a", { href: "/llm/files/summary.md", target: "_blank" }, "summary.md"));
    const files = el("p", { class: "llm-files" }, "Run directory ", el("code", {}, v.run_dir), ": ",
      ...v.files.flatMap((name, i) => [i ? ", " : "", el("a", { href: `/llm/files/${encodeURIComponent(name)}`, target: "_blank" }, name)]));
    return el("section", { id: "llm-verdict", class: "llm-card" },
      el("h3", {}, "Verdict"),
      el("p", { id: "llm-exit", class: v.exit_code === 0 ? "llm-ok" : "llm-bad" },
        `Exit code ${v.exit_code} in a nightly job: ${v.meaning}`),
      reasons.length ? el("ul", { class: "llm-reasons" }, reasons) : null, cards, links, files);
  }

  function chartsView(data) {
    const series = (key, dash) => data.variants.map((v) => ({
      color: data.colors[v], name: v, dash,
      points: data.points.filter((p) => p.variant === v && p[key] !== null).sort((a, b) => a.level - b.level)
        .map((p) => ({ x: p.level, y: p[key], ci: p[`${key}_ci`], hollow: !p.done })) }));
    const recent = (key) => data.variants.map((v) => ({
      color: data.colors[v], name: v, dots: true,
      points: data.recent.filter((r) => r.variant === v && r[key] !== null).map((r) => ({ x: r.t, y: r[key] })) }));
    const unit = data.mode === "open" ? "req/s" : "concurrent streams";
    const now = Date.now() / 1000;
    return el("section", { id: "llm-charts", class: "llm-grid" },
      chart("Aggregate output tok/s by level", series("tps"), { xlabel: unit, log: true, ticks: data.ladder }),
      chart("TPOT P50 (solid) and P95 (dashed), ms, by level", [...series("tpot_p50"), ...series("tpot_p95", "5 4")],
            { xlabel: unit, log: true, ticks: data.ladder }),
      chart(data.mode === "open" ? "TTFT from the intended send (TTFT_sched) of each request, ms, last 60 s"
        : "TTFT of each request, ms, last 60 s", recent("ttft_ms"), { xlabel: "seconds ago", time: now }),
      chart("Tokens per chunk, last 60 s", recent("tokens_per_chunk"), { xlabel: "seconds ago", time: now }));
  }

  function niceTicks(lo, hi, count) {
    const span = hi - lo || Math.abs(hi) || 1;
    const raw = span / count;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
    const out = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + 1e-9; t += step) out.push(Number(t.toPrecision(6)));
    return out;
  }

  function chart(title, series, opts) {
    const W = 460, H = 220, L = 52, R = 12, T = 10, B = 34;
    const points = series.flatMap((s) => s.points);
    const figure = el("figure", { class: "llm-chart" }, el("figcaption", {}, title));
    if (!points.length) {
      figure.appendChild(el("p", { class: "llm-note" }, "no data yet"));
      return figure;
    }
    const fx = opts.time ? (x) => x - opts.time : opts.log ? (x) => Math.log2(Math.max(x, 1e-9)) : (x) => x;
    const xsRaw = opts.time ? [opts.time - 60, opts.time] : (opts.ticks || points.map((p) => p.x));
    const xs = xsRaw.map(fx);
    let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    const ys = points.flatMap((p) => [p.y, ...(p.ci ? p.ci : [])]).filter((y) => y !== null && isFinite(y));
    const y1 = Math.max(...ys) * 1.1 || 1;
    const X = (x) => L + (fx(x) - x0) / (x1 - x0) * (W - L - R);
    const Y = (y) => H - B - (y / y1) * (H - T - B);
    const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "llm-svg", role: "img" });
    g.appendChild(svg("title", {}, title));
    for (const t of niceTicks(0, y1, 4)) {
      g.appendChild(svg("line", { x1: L, x2: W - R, y1: Y(t), y2: Y(t), class: "grid" }));
      g.appendChild(svg("text", { x: L - 6, y: Y(t) + 4, "text-anchor": "end" }, String(t)));
    }
    const xticks = opts.time ? [-60, -45, -30, -15, 0].map((s) => opts.time + s) : (opts.ticks || []);
    for (const t of xticks) {
      g.appendChild(svg("text", { x: X(t), y: H - B + 16, "text-anchor": "middle" }, opts.time ? String(Math.round(opts.time - t)) : String(t)));
    }
    g.appendChild(svg("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", class: "axis" }, opts.xlabel));
    g.appendChild(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis-line" }));
    for (const s of series) {
      if (!s.points.length) continue;
      if (!s.dots) {
        const path = s.points.map((p, i) => `${i ? "L" : "M"}${X(p.x).toFixed(1)},${Y(p.y).toFixed(1)}`).join("");
        g.appendChild(svg("path", { d: path, stroke: s.color, fill: "none", "stroke-width": 2, "stroke-dasharray": s.dash || "none" }));
      }
      for (const p of s.points) {
        if (p.ci) g.appendChild(svg("line", { x1: X(p.x), x2: X(p.x), y1: Y(p.ci[0]), y2: Y(p.ci[1]), stroke: s.color, "stroke-width": 1.5, class: "ci" }));
        g.appendChild(svg("circle", { cx: X(p.x), cy: Y(p.y), r: s.dots ? 2.5 : 4, stroke: s.color,
                                      fill: p.hollow ? "#fff" : s.color, "stroke-width": 1.5 }));
      }
    }
    figure.appendChild(g);
    figure.appendChild(el("div", { class: "llm-legend" }, ...series.filter((s) => !s.dash).map((s) =>
      el("span", {}, el("i", { style: `background: ${s.color}` }), s.name))));
    return figure;
  }

  function serverView(data) {
    const pct = (x) => (x === null || x === undefined) ? "not exported" : `${(100 * x).toFixed(1)}%`;
    return el("section", { id: "llm-server", class: "llm-card" },
      el("h3", {}, "Server side (telemetry) and client side"),
      el("table", { class: "llm-table" },
        el("tr", {}, el("th", {}, "variant"), el("th", {}, "acceptance, server (last 10 s)"),
           el("th", {}, "acceptance, per-request timings"), el("th", {}, "KV-cache use")),
        ...data.variants.map((v) => {
          const t = data.telemetry[v] || {};
          return el("tr", {}, el("td", {}, v), el("td", {}, pct(t.acceptance ?? t.acceptance_gauge)),
                    el("td", {}, pct(data.acceptance[v])), el("td", {}, pct(t.kv_cache_usage)));
        })));
  }

  function warningsView(data) {
    const items = data.warnings.map((w) => el("li", { class: `llm-w-${w.kind}` },
      el("b", {}, new Date(w.t * 1000).toLocaleTimeString()), ` ${w.text}`));
    return el("section", { id: "llm-warnings", class: "llm-card" }, el("h3", {}, `Warnings (${items.length})`),
      items.length ? el("ul", {}, items) : el("p", { class: "llm-note" }, "none so far"));
  }

  // React renders the page after this script runs and re-renders it on every state change: look again often.
  function tick() {
    shapeForm();
    poll();
  }
  setInterval(tick, POLL_MS);
  document.addEventListener("click", () => setTimeout(tick, 50));
  tick();
})();

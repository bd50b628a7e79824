// credrank web page: one query, two rankings (credibility-aware and similarity only).
// Plain JavaScript, no build step. Server text is only ever set with textContent.
"use strict";

(function () {
  const PRESETS = {
    compressed: "compressed: the default priors pulled toward each other (dispersion γ = 0.5) — " +
      "a gentle nudge toward reliable sources.",
    current: "current: the default health-domain priors (peer-reviewed 0.95, government 0.90, " +
      "established news 0.80, blog 0.50, user-generated 0.40, AI-generated 0.30, unknown 0.50).",
    aggressive: "aggressive: the same ordering spread further apart (dispersion γ = 1.5) — " +
      "low-reliability sources drop faster.",
  };
  const SELECTIONS = {
    topk: {select: null, params: {}, help: "top-k: the k best final scores, in order."},
    mmr: {select: "mmr", params: {diversity: 0.5},
          help: "MMR: trades score for diversity among the hits (diversity 0.5)."},
    exposure: {select: "exposure", params: {group_column: "source_type", rule: "parity", seed: 0},
               help: "exposure parity: a fair-exposure lottery that gives every source type the " +
                     "same average exposure over the candidate pool (one sampled list, seed 0)."},
  };

  // the query words a snippet is chosen by and that are highlighted in it: the rule of
  // credrank.core.hittext (runs of letters or digits of 2+ characters, not a stopword; a word of
  // the text matches when it starts with one). STOPWORDS is a copy of its STOPWORDS (a test
  // checks that the two agree).
  const STOPWORDS = new Set((
    "a about after all also am an and any are as at be been before being between both but by " +
    "can could did do does doing during each for from had has have having he her here hers " +
    "him his how i if in into is it its just me more most my no nor not of off on once only " +
    "or other our ours out over own same she should so some such than that the their theirs " +
    "them then there these they this those through to too under until up very was we were " +
    "what when where which while who whom why will with would you your yours").split(" "));
  const WORD = /[\p{L}\p{N}_]+/gu;

  const $ = (id) => document.getElementById(id);
  const form = $("search-form");
  const queryInput = $("query");
  const presetSelect = $("preset");
  const selectionSelect = $("selection");
  const topKInput = $("top-k");
  const statusEl = $("status");
  const credList = $("col-cred");
  const simList = $("col-sim");
  let requestSeq = 0;
  let inFlight = null;  // the AbortController of the search running

  // ---- small DOM helpers (textContent only) -------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = String(value);
      else node.setAttribute(key, String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function fmt(x, digits) {
    if (typeof x !== "number" || !isFinite(x)) return "—";
    return x.toFixed(digits === undefined ? 3 : digits);
  }

  function humanType(t) {
    return t ? String(t).replace(/_/g, " ") : "unknown";
  }

  function setStatus(text, state) {
    statusEl.textContent = text;
    statusEl.dataset.state = state;
  }

  function describeOptions() {
    const p = PRESETS[presetSelect.value] || "";
    const s = (SELECTIONS[selectionSelect.value] || SELECTIONS.topk).help;
    $("preset-help").replaceChildren(el("span", {text: p}), el("span", {text: s}));
    $("cred-label").textContent = "(" + presetSelect.value +
      (selectionSelect.value === "topk" ? "" : " + " + selectionSelect.value) + ")";
  }

  // ---- requests -----------------------------------------------------------------------
  function errorMessage(status, body) {
    const detail = body && typeof body === "object" ? body.detail : undefined;
    if (typeof detail === "string") return detail;
    if (Array.isArray(detail)) {
      return detail.map((d) => {
        if (!d || typeof d !== "object") return String(d);
        const loc = Array.isArray(d.loc) ? d.loc.filter((x) => x !== "body").join(".") : "";
        return (loc ? loc + ": " : "") + (d.msg || JSON.stringify(d));
      }).join("; ");
    }
    if (detail !== undefined) return JSON.stringify(detail);
    if (body && typeof body === "object" && typeof body.error === "string") return body.error;
    return "HTTP " + status;
  }

  // a 503 (heavy requests at their limit) is tried again once after its Retry-After, when
  // that is at most this long: the page's own two searches may be what filled the limit
  const RETRY_AFTER_MAX_S = 5;

  function sleep(seconds, signal) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, seconds * 1000);
      signal.addEventListener("abort", () => {
        clearTimeout(timer);
        reject(new DOMException("superseded", "AbortError"));
      }, {once: true});
    });
  }

  // POST /search; `signal` aborts it when a newer search starts (the server then cancels its
  // work). Errors carry the answer's field (`field`) and the HTTP status.
  async function postSearch(payload, signal, retried) {
    let response;
    try {
      response = await fetch("/search", {
        method: "POST",
        headers: {"Content-Type": "application/json", "Accept": "application/json"},
        body: JSON.stringify(payload),
        signal: signal,
      });
    } catch (exc) {
      if (exc.name === "AbortError") throw exc;
      throw new Error("could not reach the server (" + exc.message + ")");
    }
    let body = null;
    try {
      body = await response.json();
    } catch (exc) {
      if (exc.name === "AbortError") throw exc;
      body = null;
    }
    const after = response.headers.get("Retry-After");
    const wait = after === null ? NaN : Number(after);
    if (response.status === 503 && !retried && wait >= 0 && wait <= RETRY_AFTER_MAX_S) {
      await sleep(wait, signal);
      return postSearch(payload, signal, true);
    }
    if (!response.ok) {
      const message = errorMessage(response.status, body);
      const code = "HTTP " + response.status;
      const error = new Error(message === code ? message : message + " (" + code + ")");
      error.field = fieldOf(body);
      throw error;
    }
    if (!body || !Array.isArray(body.hits)) throw new Error("unexpected answer from /search");
    return body;
  }

  // the request field an error names (its first), as the API says it
  function fieldOf(body) {
    const errors = body && Array.isArray(body.errors) ? body.errors : [];
    return errors.length && typeof errors[0].field === "string" ? errors[0].field : null;
  }

  // what the page says about a failed search of one column: the page's own control for the
  // fields it sets (the pool is 3 × Results: the page sends no fetch_k of its own)
  function failure(column, exc) {
    const control = exc.field === "top_k" ? "Results"
      : exc.field === "fetch_k" ? "Results (the pool is 3 × Results)" : null;
    return column + ": " + (control ? "[" + control + "] " : "") + exc.message;
  }

  // ---- rendering ----------------------------------------------------------------------
  function safeHref(url) {
    return typeof url === "string" && /^https?:\/\//i.test(url) ? url : null;
  }

  function datesLine(dates) {
    const d = dates || {};
    const parts = [];
    for (const [key, label] of [["published_at", "published"], ["modified_at", "modified"],
                                ["observed_at", "observed"], ["verified_at", "verified"]]) {
      if (d[key]) parts.push(label + " " + String(d[key]).slice(0, 10));
    }
    const node = el("span", {class: parts.length ? "dates" : "dates undated",
                             text: parts.length ? parts.join(" · ") : "undated"});
    if (d.retrieved_at) node.title = "retrieved " + String(d.retrieved_at).slice(0, 10);
    return node;
  }

  function breakdownLabel(key, retrieval) {
    if (key === "retrieval_score") return retrieval === "bm25" ? "BM25" : "similarity";
    return key.replace(/_/g, " ");
  }

  function breakdownBar(hit, scale, retrieval) {
    const b = hit.score_breakdown || {};
    const keys = Object.keys(b).filter((k) => typeof b[k] === "number");
    const order = keys.filter((k) => k === "retrieval_score")
      .concat(keys.filter((k) => k !== "retrieval_score" && k !== "final"))
      .concat(keys.filter((k) => k === "final"));
    const summary = order.map((k) => breakdownLabel(k, retrieval) + " " + fmt(b[k])).join(", ");
    const box = el("div", {class: "breakdown", role: "img",
                           "aria-label": "score breakdown: " + summary});
    for (const key of order) {
      const value = b[key];
      const isScore = key === "retrieval_score" || key === "final";
      const width = Math.max(0, Math.min(1, value / (isScore ? scale : 1))) * 100;
      const fill = el("span", {class: "fill"});
      fill.style.width = width.toFixed(1) + "%";
      box.append(el("div", {class: "bar-row", "data-part": key},
                        el("span", {class: "bar-label", text: breakdownLabel(key, retrieval)}),
                        el("span", {class: "track"}, fill),
                        el("span", {class: "bar-value", text: fmt(value)})));
    }
    return box;
  }

  function moveBadge(credRank, otherRank, side) {
    if (otherRank === undefined) {
      return side === "cred"
        ? el("span", {class: "move new", text: "new", title: "not in the similarity top-k"})
        : el("span", {class: "move gone", text: "dropped",
                      title: "not in the credibility-aware top-k"});
    }
    const delta = otherRank - credRank;  // positive: higher here than in the other column
    if (delta === 0) return el("span", {class: "move same", text: "=", title: "same rank"});
    const up = delta > 0;
    const text = (up ? "↑" : "↓") + Math.abs(delta);
    const title = (up ? "up " : "down ") + Math.abs(delta) + " compared with " +
      (side === "cred" ? "similarity only" : "credibility-aware");
    return el("span", {class: "move " + (up ? "up" : "down"), text: text, title: title});
  }

  function groupsOf(info) {
    const sel = info && info.select;
    if (!sel || typeof sel.groups !== "object" || sel.groups === null) return null;
    return {column: sel.group_column || "source_type", groups: sel.groups, rule: sel.rule};
  }

  function queryWords(query) {
    const words = [...new Set((String(query || "").toLowerCase().match(WORD) || [])
      .filter((w) => w.length >= 2))];
    const content = words.filter((w) => !STOPWORDS.has(w));
    return content.length ? content : words;
  }

  // the hit's snippet (or full text) with the query words in <mark>: text nodes only
  function snippetNode(text, words) {
    const node = el("p", {class: "snippet"});
    let at = 0;
    for (const m of text.matchAll(WORD)) {
      const token = m[0].toLowerCase();
      if (!words.some((w) => token.startsWith(w))) continue;
      if (m.index > at) node.append(document.createTextNode(text.slice(at, m.index)));
      node.append(el("mark", {text: m[0]}));
      at = m.index + m[0].length;
    }
    if (at < text.length) node.append(document.createTextNode(text.slice(at)));
    return node;
  }

  function hitItem(hit, opts) {
    const rank = hit.rank;
    const li = el("li", {class: "hit", "data-doc-id": hit.doc_id, "data-rank": rank,
                         "data-source-type": hit.source_type || "unknown"});
    const href = safeHref(hit.url);
    const title = hit.title || hit.doc_id;
    const head = el("div", {class: "hit-head"},
                    el("span", {class: "rank", text: rank}),
                    href ? el("a", {href: href, target: "_blank", rel: "noopener noreferrer",
                                    class: "title", text: title})
                         : el("span", {class: "title", text: title}),
                    moveBadge(rank, opts.otherRanks.get(hit.doc_id), opts.side));
    li.append(head);
    if (typeof hit.text === "string" && hit.text) li.append(snippetNode(hit.text, opts.words));
    li.append(el("div", {class: "meta"},
                 el("span", {class: "host", text: hit.host || "(no host)"}),
                 el("span", {class: "badge", "data-type": hit.source_type || "unknown",
                             text: humanType(hit.source_type)}),
                 datesLine(hit.dates)));
    const b = hit.score_breakdown || {};
    let prior;
    if (typeof b.prior === "number") {
      prior = el("span", {class: "prior", text: "prior " + fmt(b.prior, 2)});
    } else {
      const would = opts.priorValues ? opts.priorValues[hit.source_type || "unknown"] : undefined;
      prior = el("span", {class: "prior muted",
                          text: typeof would === "number"
                            ? "prior " + fmt(would, 2) + " (not applied)" : "no prior"});
    }
    li.append(el("div", {class: "scoreline"}, prior,
                 el("span", {class: "final", text: "score " + fmt(hit.score)})));
    li.append(breakdownBar(hit, opts.scale, opts.retrieval));
    if (opts.groups) {
      const key = opts.groups.column === "source_type" ? (hit.source_type || "(missing)")
        : hit[opts.groups.column];
      const g = key === undefined || key === null ? undefined : opts.groups.groups[String(key)];
      if (g) {
        li.append(el("div", {class: "group-exposure",
                             text: "group exposure (" + humanType(String(key)) + "): " +
                                   "realised " + fmt(g.realised) + " · expected " +
                                   fmt(g.expected) + " · target " + fmt(g.target)}));
      }
    }
    return li;
  }

  function renderExposure(groupInfo, info) {
    const box = $("exposure");
    box.replaceChildren();
    const sel = info && info.select;
    if (!sel) {
      box.hidden = true;
      return;
    }
    const parts = ["selection: " + (sel.selector || "?")];
    if (typeof sel.objective === "number") parts.push("objective " + fmt(sel.objective));
    if (typeof sel.ilad === "number") parts.push("ILAD " + fmt(sel.ilad));
    if (sel.rule) parts.push("rule " + sel.rule);
    if (Array.isArray(sel.protected_positions)) {
      parts.push("protected at " + (sel.protected_positions.join(", ") || "none"));
    }
    box.append(el("p", {class: "selection-summary", text: parts.join(" · ")}));
    if (groupInfo) {
      const table = el("table", {class: "groups"});
      table.append(el("caption", {text: "Average exposure per " +
                                        humanType(groupInfo.column) + " group"}));
      const head = el("tr", {});
      for (const h of ["group", "docs", "target", "expected", "realised"]) {
        head.append(el("th", {scope: "col", text: h}));
      }
      table.append(el("thead", {}, head));
      const body = el("tbody", {});
      for (const [name, g] of Object.entries(groupInfo.groups)) {
        const row = el("tr", {"data-group": name});
        row.append(el("th", {scope: "row", text: humanType(name)}),
                   el("td", {text: g.size === undefined ? "—" : g.size}),
                   el("td", {text: fmt(g.target)}), el("td", {text: fmt(g.expected)}),
                   el("td", {text: fmt(g.realised)}));
        body.append(row);
      }
      table.append(body);
      box.append(table);
    }
    box.hidden = false;
  }

  function renderPriors(settings) {
    const section = $("priors-table");
    const list = $("priors-list");
    list.replaceChildren();
    const values = settings && settings.priors && settings.priors.values;
    if (!values) {
      section.hidden = true;
      return;
    }
    const entries = Object.entries(values).sort((a, b) => b[1] - a[1]);
    for (const [type, value] of entries) {
      const fill = el("span", {class: "fill"});
      fill.style.width = (Math.max(0, Math.min(1, value)) * 100).toFixed(1) + "%";
      list.append(el("li", {"data-type": type},
                     el("span", {class: "badge", "data-type": type, text: humanType(type)}),
                     el("span", {class: "track"}, fill),
                     el("span", {class: "bar-value", text: fmt(value, 2)})));
    }
    $("priors-table").querySelector("h2").textContent =
      "Prior per source type (" + (settings.priors.name || presetSelect.value) + ")";
    section.hidden = false;
  }

  function ranksOf(doc) {
    return new Map(doc.hits.map((h) => [h.doc_id, h.rank]));
  }

  function render(cred, sim) {
    const retrieval = (cred.settings && cred.settings.retrieval) || "dense";
    let scale = 1;
    for (const h of cred.hits.concat(sim.hits)) {
      const b = h.score_breakdown || {};
      for (const k of ["retrieval_score", "final"]) {
        if (typeof b[k] === "number" && b[k] > scale) scale = b[k];
      }
    }
    const priorValues = cred.settings && cred.settings.priors ? cred.settings.priors.values : null;
    const groups = groupsOf(cred.info);
    const credRanks = ranksOf(cred);
    const simRanks = ranksOf(sim);
    const words = queryWords(cred.query);
    credList.replaceChildren(...cred.hits.map((h) => hitItem(h, {
      side: "cred", otherRanks: simRanks, scale, retrieval, priorValues, groups, words})));
    simList.replaceChildren(...sim.hits.map((h) => hitItem(h, {
      side: "sim", otherRanks: credRanks, scale, retrieval, priorValues, groups: null, words})));
    if (!cred.hits.length) credList.append(el("li", {class: "empty", text: "no hits"}));
    if (!sim.hits.length) simList.append(el("li", {class: "empty", text: "no hits"}));
    renderExposure(groups, cred.info);
    renderPriors(cred.settings);
    const moved = cred.hits.filter((h) => simRanks.get(h.doc_id) !== h.rank).length;
    setStatus(cred.hits.length + " credibility-aware and " + sim.hits.length +
              " similarity-only hits; " + moved + " of the credibility-aware hits " +
              (moved === 1 ? "differs" : "differ") + " in rank.", "ok");
  }

  // ---- the search itself --------------------------------------------------------------
  function readTopK() {
    const raw = topKInput.value.trim();
    if (!/^-?\d+$/.test(raw)) return raw === "" ? 5 : raw;  // the server says what is wrong
    return parseInt(raw, 10);
  }

  function syncUrl(query) {
    const params = new URLSearchParams({q: query, priors: presetSelect.value,
                                        select: selectionSelect.value, k: topKInput.value});
    history.replaceState(null, "", "?" + params.toString());
  }

  async function run() {
    const query = queryInput.value.trim();
    if (!query) {
      setStatus("Error: type a query first.", "error");
      queryInput.setAttribute("aria-invalid", "true");
      queryInput.focus();
      return;
    }
    queryInput.removeAttribute("aria-invalid");
    const seq = ++requestSeq;
    const selection = SELECTIONS[selectionSelect.value] || SELECTIONS.topk;
    const topK = readTopK();
    const base = {query: query, top_k: topK, fetch_k: null, mode: "multiply", text: "snippet"};
    const credPayload = Object.assign({}, base, {priors: presetSelect.value,
                                                 select: selection.select,
                                                 select_params: selection.params});
    const simPayload = Object.assign({}, base, {priors: "none", select: null,
                                                select_params: {}});
    setStatus("Searching…", "busy");
    form.setAttribute("aria-busy", "true");
    credList.setAttribute("aria-busy", "true");
    simList.setAttribute("aria-busy", "true");
    syncUrl(query);
    if (inFlight) inFlight.abort();  // superseded: the server stops its work
    const controller = inFlight = new AbortController();
    const [cred, sim] = await Promise.allSettled([
      postSearch(credPayload, controller.signal), postSearch(simPayload, controller.signal)]);
    if (seq !== requestSeq) return;  // a newer search has started (and aborted these)
    inFlight = null;
    form.removeAttribute("aria-busy");
    credList.setAttribute("aria-busy", "false");
    simList.setAttribute("aria-busy", "false");
    const failed = [["credibility-aware", cred], ["similarity only", sim]]
      .filter(([, settled]) => settled.status === "rejected")
      .map(([column, settled]) => [column, settled.reason]);
    if (!failed.length) {
      try {
        render(cred.value, sim.value);
        return;
      } catch (exc) {
        failed.push(["the page", exc]);
      }
    }
    credList.replaceChildren();
    simList.replaceChildren();
    $("exposure").hidden = true;
    $("priors-table").hidden = true;
    const same = failed.length === 2 && failed[0][1].message === failed[1][1].message;
    setStatus("Error: " + (same ? failure("both columns", failed[0][1])
                                : failed.map(([column, exc]) => failure(column, exc)).join("; ")),
              "error");
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    run();
  });
  for (const select of [presetSelect, selectionSelect]) {
    select.addEventListener("change", () => {
      describeOptions();
      if (queryInput.value.trim()) run();
    });
  }

  // state from the address (?q=…&priors=…&select=…&k=…): shareable, reproducible views
  const params = new URLSearchParams(location.search);
  if (params.get("priors") && PRESETS[params.get("priors")]) presetSelect.value = params.get("priors");
  if (params.get("select") && SELECTIONS[params.get("select")]) {
    selectionSelect.value = params.get("select");
  }
  if (params.get("k")) topKInput.value = params.get("k");
  describeOptions();
  if (params.get("q")) {
    queryInput.value = params.get("q");
    run();
  }
})();

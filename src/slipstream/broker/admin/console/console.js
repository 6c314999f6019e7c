// Slipstream web console: our own small single-page app over the admin listener's JSON API.
// Routes live in the URL hash (#/, #/topics/NAME, #/groups/ID); every page has mount() (built
// once) and refresh() (called every REFRESH_MS), so inputs such as the record browser's keep
// their values while the figures update. Everything shown is set as text, never as HTML.
"use strict";

const REFRESH_MS = 1500;
const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    // Through the CSSOM, which the page's Content-Security-Policy allows (style attributes it does not).
    else if (name === "style") node.style.cssText = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(path) {
  const response = await fetch(path, { cache: "no-store" });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}

function rate(n) {
  return n >= 100 ? Math.round(n).toLocaleString() : n.toFixed(1);
}

function table(headers, rows, attrs) {
  return el("table", attrs || {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { class: h.num ? "num" : null }, h.label || h)))),
    el("tbody", {}, rows));
}

function fact(label, value, id) {
  return el("div", { class: "fact" }, el("div", { class: "label" }, label), el("div", { class: "value", id }, value));
}

function replace(id, ...children) {
  const node = document.getElementById(id);
  if (node) node.replaceChildren(...children.flat());
}

function stateBadge(state) {
  return el("span", { class: `state state-${state}` }, state);
}

// ------------------------------------------------------------------ overview

const SPARK_POINTS = 40; // the last minute of produce rates at one refresh every 1.5 s

function sparkline(values) {
  const width = 80, height = 18;
  const max = Math.max(1, ...values);
  const step = width / (SPARK_POINTS - 1);
  const offset = SPARK_POINTS - values.length;
  const points = values.map((v, i) => `${((offset + i) * step).toFixed(1)},${(height - 1 - (height - 2) * v / max).toFixed(1)}`);
  return svg("svg", { class: "spark", width, height, viewBox: `0 0 ${width} ${height}`, "aria-hidden": "true" },
    svg("polyline", { points: points.join(" "), fill: "none", stroke: "#2563eb", "stroke-width": 1.2 }));
}

function overviewPage() {
  const previous = new Map(); // topic -> {at, records_in, bytes_in}: throughput from the last refresh
  const rates = new Map(); // topic -> the last SPARK_POINTS produce rates (records/s)
  return {
    mount(root) {
      root.replaceChildren(
        el("h1", {}, "Overview"),
        el("div", { class: "card facts", id: "totals" }),
        el("h2", {}, "Topics"),
        el("div", { id: "topics" }),
        el("h2", {}, "Consumer groups"),
        el("div", { id: "groups" }),
      );
    },
    async refresh() {
      const [topics, groups] = await Promise.all([api("/api/topics"), api("/api/groups")]);
      const now = performance.now();
      const shown = topics.filter((t) => !t.internal);
      const largest = Math.max(1, ...shown.map((t) => t.size_bytes));
      const rows = shown.map((t) => {
        const before = previous.get(t.name);
        const seconds = before ? (now - before.at) / 1000 : 0;
        const recordsPerS = seconds > 0 ? Math.max(0, t.records_in - before.records_in) / seconds : 0;
        const bytesPerS = seconds > 0 ? Math.max(0, t.bytes_in - before.bytes_in) / seconds : 0;
        previous.set(t.name, { at: now, records_in: t.records_in, bytes_in: t.bytes_in });
        const history = rates.get(t.name) || [];
        if (before) history.push(recordsPerS);
        rates.set(t.name, history.slice(-SPARK_POINTS));
        const records = t.partitions.reduce((sum, p) => sum + (p.log_end_offset - p.log_start_offset), 0);
        return el("tr", { "data-topic": t.name },
          el("td", {}, el("a", { href: `#/topics/${encodeURIComponent(t.name)}` }, t.name)),
          el("td", { class: "num" }, t.partitions.length),
          el("td", { class: "num", "data-col": "records" }, records.toLocaleString()),
          el("td", { class: "num" }, bytes(t.size_bytes), " ",
            el("span", { class: "bar", style: `width:${Math.round(60 * t.size_bytes / largest)}px` })),
          el("td", { class: "num", "data-col": "records-in" }, t.records_in.toLocaleString()),
          el("td", { class: "num", "data-col": "throughput" }, `${rate(recordsPerS)} rec/s`, el("br"),
            el("span", { class: "muted" }, `${bytes(Math.round(bytesPerS))}/s`)),
          el("td", { "data-col": "rate-chart" }, sparkline(rates.get(t.name))),
          el("td", { class: "num" }, t.records_out.toLocaleString()));
      });
      replace("topics", shown.length === 0 ? el("p", { class: "muted" }, "No topics yet.") : table(
        ["Topic", { label: "Partitions", num: true }, { label: "Records", num: true }, { label: "Size", num: true },
          { label: "Records in", num: true }, { label: "Produce rate", num: true }, "Last minute", { label: "Records out", num: true }],
        rows, { id: "topics-table" }));
      replace("groups", groups.length === 0 ? el("p", { class: "muted" }, "No consumer groups yet.") : table(
        ["Group", "Type", "State", "Protocol", { label: "Members", num: true }, { label: "Lag", num: true }],
        groups.map((g) => el("tr", { "data-group": g.group_id },
          el("td", {}, el("a", { href: `#/groups/${encodeURIComponent(g.group_id)}` }, g.group_id)),
          el("td", {}, g.type),
          el("td", {}, stateBadge(g.state)),
          el("td", {}, g.protocol || "-"),
          el("td", { class: "num" }, g.member_count),
          el("td", { class: "num" }, g.lag.toLocaleString()))),
        { id: "groups-table" }));
      const totalSize = shown.reduce((sum, t) => sum + t.size_bytes, 0);
      const partitions = shown.reduce((sum, t) => sum + t.partitions.length, 0);
      replace("totals", fact("Topics", shown.length), fact("Partitions", partitions), fact("Stored", bytes(totalSize)),
        fact("Groups", groups.length));
    },
  };
}

// ------------------------------------------------------------------ topic page

function decoded(field, format) {
  if (field === null) return el("span", { class: "muted" }, "null");
  const cut = field.truncated ? el("span", { class: "tag" }, `first ${field.hex.length / 2} of ${field.size} bytes`) : null;
  if (format === "hex" || field.text === null) {
    const pairs = field.hex.match(/../g) || [];
    return el("span", {}, cut, el("pre", { class: "hex" }, pairs.join(" ")));
  }
  if (format === "json") {
    try {
      return el("span", {}, cut, el("pre", { class: "json" }, JSON.stringify(JSON.parse(field.text), null, 2)));
    } catch (_) {
      // Keys are mostly plain strings: text that is not JSON shows as text, marked by its style.
      return el("span", {}, cut, el("pre", { class: "text not-json", title: "not JSON: shown as text" }, field.text));
    }
  }
  return el("span", {}, cut, el("pre", { class: "text" }, field.text));
}

function topicPage(name) {
  const browser = { partition: 0, offset: "", limit: 20, format: "json", follow: true };
  let partitionCount = 0;

  async function loadRecords() {
    const params = new URLSearchParams({ partition: browser.partition, limit: browser.limit });
    if (!browser.follow && browser.offset !== "") params.set("offset", browser.offset);
    let page;
    try {
      page = await api(`/api/topics/${encodeURIComponent(name)}/records?${params}`);
    } catch (error) {
      replace("records", el("p", { class: "error" }, String(error.message)));
      return;
    }
    const rows = page.records.map((r) => el("tr", { "data-offset": r.offset },
      el("td", { class: "num mono" }, r.offset),
      el("td", { class: "mono" }, r.timestamp >= 0 ? new Date(r.timestamp).toISOString().replace("T", " ").replace("Z", "") : "-"),
      el("td", { class: "key" }, decoded(r.key, browser.format)),
      el("td", { class: "value" }, decoded(r.value, browser.format)),
      el("td", { class: "headers" }, r.headers.length === 0 ? el("span", { class: "muted" }, "-") :
        r.headers.map((h) => el("div", {}, el("span", { class: "tag" }, h.name), decoded(h.value, browser.format))))));
    replace("records",
      el("p", { class: "muted", id: "records-range" }, page.log_start_offset === page.log_end_offset
        ? `Partition ${page.partition} is empty (next offset ${page.log_end_offset}).`
        : `Partition ${page.partition}: offsets ${page.log_start_offset} to ${page.log_end_offset - 1}; ` +
          `showing ${page.records.length} record(s) from offset ${page.offset}.`),
      page.records.length === 0 ? el("p", { class: "muted" }, "No records here.") :
        table(["Offset", "Timestamp (UTC)", "Key", "Value", "Headers"], rows, { id: "records-table" }));
    if (!browser.follow) browser.next = page.next_offset;
  }

  function controls() {
    const partition = el("select", { id: "browse-partition", onchange: (e) => { browser.partition = Number(e.target.value); loadRecords(); } });
    const offset = el("input", { id: "browse-offset", type: "number", min: 0, placeholder: "latest", size: 8,
      onchange: (e) => { browser.offset = e.target.value; browser.follow = e.target.value === ""; follow.checked = browser.follow; loadRecords(); } });
    const limit = el("select", { id: "browse-limit", onchange: (e) => { browser.limit = Number(e.target.value); loadRecords(); } },
      [10, 20, 50, 100].map((n) => el("option", { value: n, selected: n === browser.limit }, n)));
    const format = el("select", { id: "browse-format", onchange: (e) => { browser.format = e.target.value; loadRecords(); } },
      ["json", "text", "hex"].map((f) => el("option", { value: f, selected: f === browser.format }, f.toUpperCase())));
    const follow = el("input", { id: "browse-follow", type: "checkbox", checked: browser.follow,
      onchange: (e) => { browser.follow = e.target.checked; if (browser.follow) { offset.value = ""; browser.offset = ""; } loadRecords(); } });
    const next = el("button", { id: "browse-next", onclick: () => {
      if (browser.next === undefined) return;
      browser.follow = false; follow.checked = false; browser.offset = String(browser.next); offset.value = browser.offset; loadRecords();
    } }, "Next page");
    return el("div", { class: "controls" },
      el("label", {}, "Partition", partition), el("label", {}, "From offset", offset), el("label", {}, "Records", limit),
      el("label", {}, "Show as", format), el("label", {}, "Follow the end", follow), next);
  }

  return {
    mount(root) {
      root.replaceChildren(
        el("h1", {}, "Topic ", el("span", { class: "mono" }, name)),
        el("div", { class: "card facts", id: "topic-facts" }),
        el("h2", {}, "Partitions"), el("div", { id: "partitions" }),
        el("h2", {}, "Records"), el("div", { class: "card" }, controls(), el("div", { id: "records" })),
        el("h2", {}, "Configs"), el("div", { id: "configs" }),
      );
    },
    async refresh() {
      let topic;
      try {
        topic = await api(`/api/topics/${encodeURIComponent(name)}`);
      } catch (error) {
        replace("topic-facts", el("p", { class: "error", id: "topic-missing" }, error.message));
        return;
      }
      replace("topic-facts", fact("Partitions", topic.partitions.length), fact("Size", bytes(topic.size_bytes)),
        fact("Records in", topic.records_in.toLocaleString()), fact("Records out", topic.records_out.toLocaleString()),
        fact("Topic id", el("span", { class: "mono" }, topic.topic_id)));
      replace("partitions", table(
        [{ label: "Partition", num: true }, { label: "Start offset", num: true }, { label: "End offset", num: true },
          { label: "Records", num: true }, { label: "Size", num: true }, { label: "Segments", num: true }],
        topic.partitions.map((p) => el("tr", { "data-partition": p.partition },
          el("td", { class: "num" }, p.partition), el("td", { class: "num" }, p.log_start_offset),
          el("td", { class: "num" }, p.log_end_offset), el("td", { class: "num" }, p.log_end_offset - p.log_start_offset),
          el("td", { class: "num" }, bytes(p.size_bytes)), el("td", { class: "num" }, p.segments))),
        { id: "partitions-table" }));
      const configs = Object.entries(topic.configs);
      replace("configs", configs.length === 0 ? el("p", { class: "muted" }, "Broker defaults (no topic overrides).") :
        table(["Config", "Value"], configs.map(([k, v]) => el("tr", {}, el("td", { class: "mono" }, k), el("td", { class: "mono" }, v))),
          { id: "configs-table" }));
      if (topic.partitions.length !== partitionCount) {
        partitionCount = topic.partitions.length;
        const select = document.getElementById("browse-partition");
        select.replaceChildren(...topic.partitions.map((p) => el("option", { value: p.partition, selected: p.partition === browser.partition }, p.partition)));
      }
      if (browser.follow || !document.getElementById("records-table")) await loadRecords();
    },
  };
}

// ------------------------------------------------------------------ group page

function lagChart(lag) {
  const width = 640, height = 180, left = 48, right = 10, top = 10, bottom = 22;
  const samples = lag.samples;
  if (samples.length === 0 || lag.partitions.length === 0) {
    return el("p", { class: "muted", id: "lag-chart-empty" }, "No lag to show yet (the group has committed no offsets).");
  }
  const first = samples[0].at_ms, last = samples[samples.length - 1].at_ms;
  const span = Math.max(1, last - first);
  let max = 1;
  for (const s of samples) for (const v of Object.values(s.lag)) max = Math.max(max, v);
  const x = (at) => left + (width - left - right) * (at - first) / span;
  const y = (v) => top + (height - top - bottom) * (1 - v / max);
  const lines = lag.partitions.map((name, i) => {
    const points = samples.filter((s) => name in s.lag).map((s) => `${x(s.at_ms).toFixed(1)},${y(s.lag[name]).toFixed(1)}`);
    return svg("polyline", { points: points.join(" "), fill: "none", stroke: PALETTE[i % PALETTE.length], "stroke-width": 1.6, "data-partition": name });
  });
  const seconds = Math.round(span / 1000);
  const chart = svg("svg", { class: "chart", id: "lag-chart", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `lag per partition over the last ${seconds} s` },
    svg("line", { x1: left, y1: top, x2: left, y2: height - bottom, stroke: "#ccc" }),
    svg("line", { x1: left, y1: height - bottom, x2: width - right, y2: height - bottom, stroke: "#ccc" }),
    svg("text", { x: left - 6, y: top + 8, "text-anchor": "end" }, max.toLocaleString()),
    svg("text", { x: left - 6, y: height - bottom, "text-anchor": "end" }, "0"),
    svg("text", { x: left, y: height - 6 }, `${seconds} s ago`),
    svg("text", { x: width - right, y: height - 6, "text-anchor": "end" }, "now"),
    lines);
  const legend = el("div", { class: "chart-legend" }, lag.partitions.map((name, i) => {
    const latest = samples[samples.length - 1].lag[name];
    return el("span", { style: `--swatch:${PALETTE[i % PALETTE.length]}` }, `${name}: ${latest === undefined ? "-" : latest}`);
  }));
  return el("div", {}, chart, legend);
}

function assignmentGrid(members) {
  const columns = new Set();
  for (const m of members) for (const [topic, parts] of Object.entries(m.assignment || {})) for (const p of parts) columns.add(`${topic}-${p}`);
  const names = [...columns].sort((a, b) => {
    const [ta, pa] = [a.slice(0, a.lastIndexOf("-")), Number(a.slice(a.lastIndexOf("-") + 1))];
    const [tb, pb] = [b.slice(0, b.lastIndexOf("-")), Number(b.slice(b.lastIndexOf("-") + 1))];
    return ta === tb ? pa - pb : ta < tb ? -1 : 1;
  });
  if (members.length === 0) return el("p", { class: "muted" }, "No members.");
  if (names.length === 0) return el("p", { class: "muted", id: "assignment-empty" }, "No partitions assigned (yet).");
  const rows = members.map((m) => {
    const owned = new Set();
    for (const [topic, parts] of Object.entries(m.assignment || {})) for (const p of parts) owned.add(`${topic}-${p}`);
    return el("tr", { "data-member": m.member_id },
      el("th", { class: "member mono" }, m.client_id || m.member_id),
      names.map((n) => el("td", { class: owned.has(n) ? "assigned" : null, "data-partition": n, title: owned.has(n) ? `${n}: ${m.member_id}` : null })));
  });
  return el("table", { class: "grid", id: "assignment-grid" },
    el("thead", {}, el("tr", {}, el("th", { class: "member" }, "Member \\ partition"), names.map((n) => el("th", { class: "mono" }, n)))),
    el("tbody", {}, rows));
}

function groupPage(id) {
  return {
    mount(root) {
      root.replaceChildren(
        el("h1", {}, "Group ", el("span", { class: "mono" }, id)),
        el("div", { class: "card facts", id: "group-facts" }),
        el("h2", {}, "Members"), el("div", { id: "members" }),
        el("h2", {}, "Assignment"), el("div", { id: "assignment" }),
        el("h2", {}, "Lag per partition"), el("div", { id: "lag" }),
        el("h2", {}, "Committed offsets"), el("div", { id: "offsets" }),
        el("h2", {}, "Rebalance timeline"), el("div", { class: "card" }, el("ol", { class: "timeline", id: "timeline" })),
      );
    },
    async refresh() {
      const path = `/api/groups/${encodeURIComponent(id)}`;
      const [group, lag, timeline] = await Promise.all([
        api(path).catch((error) => ({ missing: error.message })), api(`${path}/lag`).catch(() => null), api(`${path}/timeline`).catch(() => null),
      ]);
      if (group.missing) {
        replace("group-facts", fact("State", stateBadge("Dead"), "group-state"), el("p", { class: "muted" }, group.missing));
        replace("members", el("p", { class: "muted" }, "No members."));
        replace("assignment");
      } else {
        replace("group-facts", fact("State", stateBadge(group.state), "group-state"),
          fact("Type", group.type, "group-type"), fact("Protocol type", group.protocol_type || "-", "group-protocol-type"),
          fact("Protocol", group.protocol || "-", "group-protocol"), fact("Members", group.member_count, "group-member-count"),
          fact("Total lag", group.lag.toLocaleString(), "group-lag"));
        replace("members", group.members.length === 0 ? el("p", { class: "muted" }, "No members.") : table(
          ["Member id", "Client id", "Host", "Instance id", group.type === "consumer" ? "Epoch" : "Generation"],
          group.members.map((m) => el("tr", { "data-member": m.member_id },
            el("td", { class: "mono" }, m.member_id), el("td", { class: "client-id" }, m.client_id),
            el("td", { class: "host" }, m.client_host), el("td", {}, m.instance_id || "-"),
            el("td", { class: "num" }, m.member_epoch !== undefined ? m.member_epoch : m.generation))),
          { id: "members-table" }));
        replace("assignment", assignmentGrid(group.members));
        replace("offsets", group.offsets.length === 0 ? el("p", { class: "muted" }, "No committed offsets.") : table(
          ["Topic", { label: "Partition", num: true }, { label: "Committed", num: true }, { label: "Log end", num: true }, { label: "Lag", num: true }],
          group.offsets.map((o) => el("tr", {}, el("td", {}, o.topic), el("td", { class: "num" }, o.partition),
            el("td", { class: "num" }, o.committed_offset), el("td", { class: "num" }, o.log_end_offset), el("td", { class: "num" }, o.lag))),
          { id: "offsets-table" }));
      }
      if (lag) replace("lag", lagChart(lag));
      if (timeline) {
        const list = document.getElementById("timeline");
        const atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
        replace("timeline", timeline.entries.length === 0 ? el("li", { class: "muted" }, "No rebalances recorded.") :
          timeline.entries.map((e) => el("li", { class: e.kind }, e.time ? el("span", { class: "time" }, e.time) : null, el("span", { class: "text" }, e.text))));
        if (atBottom) list.scrollTop = list.scrollHeight;
      }
    },
  };
}

// ------------------------------------------------------------------ router and polling

let current = null;
let timer = null;

function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  let parts;
  try {
    parts = hash.split("/").filter(Boolean).map(decodeURIComponent);
  } catch (_) {
    parts = []; // a malformed %-escape: the overview
  }
  if (parts[0] === "topics" && parts.length >= 2) return topicPage(parts.slice(1).join("/"));
  if (parts[0] === "groups" && parts.length >= 2) return groupPage(parts.slice(1).join("/"));
  return overviewPage();
}

async function tick(page) {
  const live = document.getElementById("live");
  try {
    await page.refresh();
    live.textContent = `live · ${new Date().toLocaleTimeString()}`;
    live.classList.remove("stale");
  } catch (error) {
    live.textContent = `not updating: ${error.message}`;
    live.classList.add("stale");
  }
  if (page === current) timer = setTimeout(() => tick(page), REFRESH_MS);
}

function show() {
  clearTimeout(timer);
  current = route();
  current.mount(document.getElementById("page"));
  tick(current);
}

window.addEventListener("hashchange", show);
show();

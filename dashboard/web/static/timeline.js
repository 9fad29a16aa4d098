// Kernelscope timeline: a canvas view of a trace's tracks (CUDA streams, CPU threads, NVTX ranges per rank),
// drawn from a binary payload (dashboard/web/timeline_payload.py). As in Perfetto: the plain mouse wheel scrolls the
// page; ctrl/⌘+wheel or W/S zoom (never beyond the trace: zoomed out, the view is the whole trace); pan: drag,
// shift+wheel, a sideways swipe or A/D; double-click zooms in. The canvas is at least half the window's height; the
// colour legend folds away. Colours follow the OS's light or dark preference. The view redraws at once from the data it has; when it settles the component
// asks the server for the new window (level of detail: merged marks become single events as you zoom in).
// A click on an event selects it (the page shows its detail). Kernels are coloured by name, or, when the payload
// carries a legend (an Nsight Compute run of the same program is joined), by their ncu-derived bound: the colour
// buttons switch at once and tell the page (state "color", written to the URL). Used by the Streamlit component
// (setStateValue / setTriggerValue) and, with no server, by the offline HTML export.

const LABEL_W = 190, AXIS_H = 26, ROW_H = 16, ROW_GAP = 1, TRACK_GAP = 6, GROUP_H = 18;
const KIND_COLORS = {kernel: null, memcpy: "#E69F00", memset: "#999999", api: "#56B4E9", cpu_op: null,
                     nvtx: "#CC79A7"};
const PALETTE = ["#0072B2", "#009E73", "#D55E00", "#CC79A7", "#E69F00", "#56B4E9", "#8C564B", "#7F7F7F",
                 "#1F77B4", "#2CA02C", "#9467BD", "#BCBD22", "#17BECF", "#E377C2"];

// one colour per bound (analyzers.join.BOUNDS): Okabe-Ito and Tableau hues, greys for "no counters" and "not profiled"
const BOUND_COLORS = {dram: "#D55E00", fp32: "#0072B2", tensor: "#009E73", smem: "#8C564B", latency: "#9467BD",
                      launch: "#17BECF", "no counters": "#5F6B7A", "not profiled": "#C3C9D2"};
const BOUND_LABELS = {dram: "DRAM bandwidth", fp32: "FP32 throughput", tensor: "tensor cores", smem: "shared memory",
                      latency: "latency",
                      launch: "launch", "no counters": "no counters", "not profiled": "not profiled"};
const LIGHT = new Set(["#C3C9D2"]);

function decode(buf) {
  const u8 = buf instanceof Uint8Array ? buf : new Uint8Array(buf);
  const dv = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  const magic = String.fromCharCode(u8[0], u8[1], u8[2], u8[3]);
  if (magic !== "KSTL") throw new Error("not a timeline payload");
  const hlen = dv.getUint32(4, true);
  const head = JSON.parse(new TextDecoder().decode(u8.subarray(8, 8 + hlen)));
  let off = 8 + hlen;
  const copy = u8.slice(off).buffer;   // aligned copy of the arrays
  off = 0;
  const arr = {};
  const types = {f8: Float64Array, i4: Int32Array, u1: Uint8Array};
  for (const [name, dt, n] of head.arrays) {
    const T = types[dt];
    off = Math.ceil(off / T.BYTES_PER_ELEMENT) * T.BYTES_PER_ELEMENT;
    arr[name] = new T(copy, off, n);
    off += n * T.BYTES_PER_ELEMENT;
  }
  return {head, arr};
}

function hash(s) { let h = 0; for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0; return h; }

function fmtTime(ns) {
  const a = Math.abs(ns);
  if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
  if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
  if (a >= 1e3) return (ns / 1e3).toFixed(2) + " µs";
  return Math.round(ns) + " ns";
}

function niceStep(span, target) {
  const raw = span / target, p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function esc(s) {
  return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
}

export default function(component) {
  const {data, parentElement, setStateValue, setTriggerValue} = component;
  const root = parentElement;
  let st = root.__ksTimeline;
  if (!st) {
    st = root.__ksTimeline = {view: null, payload: null, sel: null, hover: -1, pending: null, timer: null,
                              paints: 0, requests: 0};
    const box = document.createElement("div");
    box.className = "ks-tl";
    box.tabIndex = 0;
    box.innerHTML = '<div class="ks-tl-bar"><button data-a="in" title="zoom in (W)">+</button>' +
      '<button data-a="out" title="zoom out (S)">−</button><button data-a="left" title="pan left (A)">←</button>' +
      '<button data-a="right" title="pan right (D)">→</button><button data-a="reset" title="whole trace">reset</button>' +
      '<span class="ks-tl-color" hidden>kernels by <button data-c="bound" title="their Nsight Compute bound">' +
      'ncu bound</button><button data-c="name" title="their name">name</button></span>' +
      '<span class="ks-tl-info"></span></div><div class="ks-tl-legend" hidden></div>' +
      '<div class="ks-tl-scroll"><canvas></canvas></div><div class="ks-tl-tip" hidden></div>';
    root.appendChild(box);
    st.box = box;
    st.canvas = box.querySelector("canvas");
    st.tip = box.querySelector(".ks-tl-tip");
    st.info = box.querySelector(".ks-tl-info");
    attach(st);
  }
  st.setState = setStateValue || (() => {});
  st.trigger = setTriggerValue || (() => {});
  if (data && data !== st.raw) {
    st.raw = data;
    st.payload = decode(data);
    const h = st.payload.head;
    st.sel = h.selected || null;
    st.color = h.legend ? (h.color || "bound") : "name";
    buildIndex(st);
    legend(st);
    if (!st.view || !st.pending) {
      st.view = {t0: h.t0, t1: h.t1};          // first data, or the page changed the window (URL, widgets)
    } else if (Math.abs(st.pending.t0 - h.t0) <= 1 && Math.abs(st.pending.t1 - h.t1) <= 1) {
      st.lastRefineMs = performance.now() - st.pending.at;    // the answer to our request: keep the user's view
      st.pending = null;
    }
    st.box.dataset.window = `${Math.round(h.t0)},${Math.round(h.t1)}`;
    st.box.dataset.detailed = h.detailed ? "1" : "0";
    st.box.dataset.refineMs = st.lastRefineMs === undefined ? "" : String(Math.round(st.lastRefineMs));
  }
  draw(st);
  if (st.payload && !st.pending) request(st);
  return () => {};
}

function buildIndex(st) {
  const {head, arr} = st.payload;
  // rows: one per (track, depth); y offsets with a header per rank group
  const rows = [], rowOf = new Map();
  let y = AXIS_H, group = null;
  st.groups = [];
  for (const t of head.tracks) {
    if (t.group !== group) { group = t.group; st.groups.push({label: group, y}); y += GROUP_H; }
    for (let d = 0; d < t.rows; d++) {
      rowOf.set(t.track * 4096 + d, rows.length);
      rows.push({track: t, depth: d, y, marks: []});
      y += ROW_H + ROW_GAP;
    }
    y += TRACK_GAP;
  }
  st.rows = rows;
  st.height = Math.max(y + 4, 80);
  const n = arr.start.length;
  for (let i = 0; i < n; i++) {
    const r = rowOf.get(arr.track[i] * 4096 + arr.depth[i]);
    if (r !== undefined) rows[r].marks.push(i);
  }
  for (const r of rows) r.marks.sort((a, b) => arr.start[a] - arr.start[b]);
  st.trackRow = new Map();
  for (let i = 0; i < rows.length; i++) if (rows[i].depth === 0) st.trackRow.set(rows[i].track.track, i);
}

function boundOf(st, i) {
  const {head, arr} = st.payload;
  if (!head.legend || !arr.bound || arr.bound[i] === 255) return null;
  return head.legend.names[arr.bound[i]];
}

function colorOf(st, i) {
  const {head, arr} = st.payload;
  const kind = head.kinds[arr.kind[i]];
  const fixed = KIND_COLORS[kind];
  if (fixed) return fixed;
  if (kind === "kernel" && st.color === "bound") {
    const b = boundOf(st, i);
    if (b) return BOUND_COLORS[b] || "#000000";
  }
  return PALETTE[Math.abs(hash(head.names[arr.name[i]] || "")) % PALETTE.length];
}

function legend(st) {
  // the colour buttons and, when kernels are coloured by bound, what each colour means and where it comes from
  const lg = st.payload.head.legend, box = st.box.querySelector(".ks-tl-legend");
  const bar = st.box.querySelector(".ks-tl-color");
  bar.hidden = !lg;
  for (const b of bar.querySelectorAll("button")) b.classList.toggle("on", b.dataset.c === st.color);
  box.hidden = !lg || st.color !== "bound";
  st.box.dataset.color = st.color;
  if (!lg) { box.innerHTML = ""; return; }
  const open = st.legendOpen ? " open" : "";
  box.innerHTML = `<details${open}><summary>` + lg.names.map(b =>
      `<span class="ks-sw" style="background:${BOUND_COLORS[b]}"></span>${esc(BOUND_LABELS[b] || b)}`).join(" · ") +
    ` <span class="ks-tl-lg-more">(what the colours mean)</span></summary>` +
    `<div class="ks-tl-lg-head">Kernels coloured by their bound from ${esc(lg.source)}, in the ` +
    `Nsight Compute run <code>${esc(lg.ncu_source)}</code> (${esc(lg.ncu_run)}) of the same program; a click on a ` +
    "kernel opens its ncu detail below.</div><ul>" + lg.names.map(b =>
      `<li data-bound="${esc(b)}"><span class="ks-sw" style="background:${BOUND_COLORS[b]}"></span>` +
      `<b>${esc(BOUND_LABELS[b] || b)}</b> — ${esc((lg.meanings || {})[b] || "")}</li>`).join("") + "</ul></details>";
  box.querySelector("details").addEventListener("toggle", e => { st.legendOpen = e.target.open; });
}

// canvas colours of the light and the dark scheme (the OS's preference, as the page's CSS follows it)
const THEMES = {
  light: {axisBg: "#f9fafb", grid: "#e5e7eb", axisText: "#374151", group: "#111827", label: "#374151", sel: "#111827",
          edge: "#d1d5db"},
  dark: {axisBg: "#1f2229", grid: "#3a3d46", axisText: "#c9ced6", group: "#f3f4f6", label: "#c9ced6", sel: "#f9fafb",
         edge: "#4b5060"},
};
function theme() {
  return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? THEMES.dark : THEMES.light;
}

function xOf(st, t, w) { const v = st.view; return LABEL_W + (t - v.t0) / (v.t1 - v.t0) * (w - LABEL_W); }
function tOf(st, x, w) { const v = st.view; return v.t0 + (x - LABEL_W) / (w - LABEL_W) * (v.t1 - v.t0); }

function draw(st) {
  if (!st.payload) return;
  const t_start = performance.now();
  const cv = st.canvas, w = Math.max(st.box.clientWidth || 900, 400);
  const h = Math.max(st.height, Math.round((window.innerHeight || 800) * 0.5));   // at least half the window
  const T = theme();
  const dpr = window.devicePixelRatio || 1;
  if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(h * dpr)) {
    cv.width = Math.round(w * dpr); cv.height = Math.round(h * dpr);
    cv.style.width = w + "px"; cv.style.height = h + "px";
  }
  const g = cv.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  g.font = "11px " + (st.payload.head.font || "sans-serif");
  const {head, arr} = st.payload, v = st.view, span = v.t1 - v.t0;
  // axis
  g.fillStyle = T.axisBg; g.fillRect(0, 0, w, AXIS_H);
  const step = niceStep(span, Math.max(2, (w - LABEL_W) / 110));
  g.strokeStyle = T.grid; g.fillStyle = T.axisText; g.textBaseline = "middle";
  for (let t = Math.ceil(v.t0 / step) * step; t <= v.t1; t += step) {
    const x = xOf(st, t, w);
    g.beginPath(); g.moveTo(x, AXIS_H - 6); g.lineTo(x, h); g.stroke();
    g.fillText(fmtTime(t), x + 3, AXIS_H / 2);
  }
  // rows
  for (const grp of st.groups) {
    g.fillStyle = T.group; g.font = "600 12px " + (head.font || "sans-serif");
    g.fillText(grp.label, 6, grp.y + GROUP_H / 2);
  }
  g.font = "11px " + (head.font || "sans-serif");
  const x0 = LABEL_W, x1 = w;
  for (const r of st.rows) {
    if (r.depth === 0) {
      g.fillStyle = T.label;
      g.fillText(r.track.label.slice(0, 30), 10, r.y + ROW_H / 2);
    }
    // binary search the first mark that may be visible
    const m = r.marks;
    let lo = 0, hi = m.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (arr.end[m[mid]] < v.t0) lo = mid + 1; else hi = mid; }
    let lastX = -1;
    for (let k = Math.max(0, lo - 64); k < m.length; k++) {
      const i = m[k];
      if (arr.start[i] > v.t1) break;
      if (arr.end[i] < v.t0) continue;
      let xa = Math.max(x0, xOf(st, arr.start[i], w)), xb = Math.min(x1, xOf(st, arr.end[i], w));
      if (xb - xa < 1) { if (Math.floor(xa) === lastX) continue; xb = xa + 1; }
      lastX = Math.floor(xa);
      const merged = arr.count[i] > 1;
      const dur = arr.end[i] - arr.start[i];
      g.globalAlpha = merged ? Math.min(1, 0.25 + 0.75 * arr.busy[i] / Math.max(dur, 1)) : 1;
      g.fillStyle = colorOf(st, i);
      g.fillRect(xa, r.y, xb - xa, ROW_H);
      g.globalAlpha = 1;
      if (!merged && xb - xa > 36) {
        g.save(); g.beginPath(); g.rect(xa, r.y, xb - xa, ROW_H); g.clip();
        g.fillStyle = LIGHT.has(colorOf(st, i)) ? "#111827" : "#ffffff";
        g.fillText(head.names[arr.name[i]] || "", xa + 3, r.y + ROW_H / 2 + 1);
        g.restore();
      }
      if (st.sel && arr.row[i] === st.sel.row && head.srcs[arr.src[i]] === st.sel.src) {
        g.strokeStyle = T.sel; g.lineWidth = 2; g.strokeRect(xa - 1, r.y - 1, xb - xa + 2, ROW_H + 2);
        g.lineWidth = 1; g.strokeStyle = T.grid;
        drawFlow(st, g, i, r, w);
      }
    }
  }
  if (st.hover >= 0 && st.hoverRow) drawFlow(st, st.canvas.getContext("2d"), st.hover, st.hoverRow, w);
  g.strokeStyle = T.edge; g.beginPath(); g.moveTo(LABEL_W - 0.5, 0); g.lineTo(LABEL_W - 0.5, h); g.stroke();
  st.paints += 1;
  st.lastPaintMs = performance.now() - t_start;
  st.box.dataset.paints = String(st.paints);
  st.box.dataset.view = `${Math.round(v.t0)},${Math.round(v.t1)}`;
  st.info.textContent = `${fmtTime(v.t0)} – ${fmtTime(v.t1)} (${fmtTime(span)} shown) · ` +
    (head.detailed ? `${head.events.toLocaleString()} events` :
     `${head.events.toLocaleString()} events, merged per pixel where narrower than one (zoom in for single events)`);
}

function drawFlow(st, g, i, row, w) {
  // launch call -> kernel: an arrow from the end of the launch call on its CPU thread to the kernel's start
  const {arr} = st.payload;
  if (!arr.link_track || arr.link_track[i] < 0) return;
  const ri = st.trackRow.get(arr.link_track[i]);
  if (ri === undefined) return;
  const src = st.rows[ri];
  const xa = xOf(st, arr.link_end[i], w), ya = src.y + ROW_H / 2;
  const xb = xOf(st, arr.start[i], w), yb = row.y + ROW_H / 2;
  const T = theme();
  g.save(); g.beginPath(); g.rect(LABEL_W, 0, w - LABEL_W, st.height); g.clip();
  g.strokeStyle = T.sel; g.lineWidth = 1.2;
  g.beginPath(); g.moveTo(xa, ya); g.bezierCurveTo(xa + 20, ya, xb - 20, yb, xb, yb); g.stroke();
  g.fillStyle = T.sel; g.beginPath(); g.arc(xb, yb, 2.5, 0, 6.3); g.fill();
  g.restore();
}

function hit(st, x, y) {
  if (!st.payload || x < LABEL_W) return null;
  const w = st.canvas.clientWidth;
  const row = st.rows.find(r => y >= r.y && y < r.y + ROW_H);
  if (!row) return null;
  const t = tOf(st, x, w), tol = (st.view.t1 - st.view.t0) / (w - LABEL_W) * 2;
  const {arr} = st.payload;
  let best = -1, bestD = Infinity;
  for (const i of row.marks) {
    if (arr.start[i] > t + tol) break;
    if (arr.end[i] < t - tol) continue;
    const d = t < arr.start[i] ? arr.start[i] - t : t > arr.end[i] ? t - arr.end[i] : 0;
    if (d < bestD) { bestD = d; best = i; }
  }
  return best >= 0 ? {i: best, row} : null;
}

function tipHtml(st, i) {
  const {head, arr} = st.payload;
  const kind = head.kinds[arr.kind[i]], name = head.names[arr.name[i]] || "";
  const dur = arr.end[i] - arr.start[i];
  if (arr.count[i] > 1) {
    return `<b>${arr.count[i].toLocaleString()} events</b> merged in one pixel column<br>longest: ${esc(name)}<br>` +
      `busy ${fmtTime(arr.busy[i])} of ${fmtTime(dur)} (${(100 * arr.busy[i] / Math.max(dur, 1)).toFixed(0)} %)` +
      `<br><i>zoom in for single events</i>`;
  }
  let s = `<b>${esc(name)}</b><br>${kind} · duration ${fmtTime(dur)} · starts at ${fmtTime(arr.start[i])}`;
  const b = kind === "kernel" ? boundOf(st, i) : null;
  if (b) s += `<br>bound (ncu): ${esc(BOUND_LABELS[b] || b)}`;
  if (arr.launch && arr.launch[i] >= 0) {
    const delay = arr.delay[i];
    s += `<br>launch call: ${esc(head.names[arr.launch[i]] || "")} (${fmtTime(arr.link_end[i] - arr.link_start[i])})`;
    if (!Number.isNaN(delay)) s += `<br>launch delay: ${fmtTime(delay)}` + (delay > 100000 ? " <b>(over 100 µs)</b>" : "");
  } else if (kind === "kernel" || kind === "memcpy" || kind === "memset") {
    s += "<br>launch call not in the trace";
  }
  return s + "<br><i>click for the detail</i>";
}

function request(st, immediate) {
  // ask the server for the data of the current view once it settles (level of detail)
  clearTimeout(st.timer);
  const go = () => {
    const v = st.view, h = st.payload.head;
    if (Math.abs(v.t0 - h.t0) <= 1 && Math.abs(v.t1 - h.t1) <= 1) return;
    st.pending = {t0: v.t0, t1: v.t1, at: performance.now()};
    st.requests += 1;
    st.setState("window", {t0: v.t0, t1: v.t1, width: Math.round(st.canvas.clientWidth - LABEL_W)});
  };
  if (immediate) go(); else st.timer = setTimeout(go, 100);
}

function zoom(st, factor, at) {
  const v = st.view, end = st.payload.head.end;
  const c = at === undefined ? (v.t0 + v.t1) / 2 : at;
  let t0 = c - (c - v.t0) * factor, t1 = c + (v.t1 - c) * factor;
  if (t1 - t0 < 1000) { t0 = c - 500; t1 = c + 500; }
  st.view = clamp(t0, t1, end);
}

function clamp(t0, t1, end) {
  // the view stays inside the trace [0, end]: zoomed out as far as it goes, it is the whole trace
  const span = Math.min(t1 - t0, end);
  if (t0 < 0) { t0 = 0; t1 = span; }
  if (t1 > end) { t1 = end; t0 = Math.max(0, end - span); }
  return {t0, t1: Math.max(t1, t0 + 1)};
}

function attach(st) {
  const cv = st.canvas, box = st.box;
  let drag = null;
  cv.addEventListener("wheel", e => {
    if (!st.payload) return;
    const sideways = e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY);
    if (!sideways && !e.ctrlKey && !e.metaKey) return;     // the plain wheel scrolls the page
    e.preventDefault();
    const w = cv.clientWidth, rect = cv.getBoundingClientRect();
    const v = st.view, span = v.t1 - v.t0;
    if (sideways) {
      const d = (e.shiftKey ? e.deltaY : e.deltaX) / (w - LABEL_W) * span;
      st.view = clamp(v.t0 + d, v.t1 + d, st.payload.head.end);
    } else {
      zoom(st, Math.exp(e.deltaY * 0.002), tOf(st, e.clientX - rect.left, w));
    }
    draw(st); request(st);
  }, {passive: false});
  cv.addEventListener("mousedown", e => { drag = {x: e.clientX, v: {...st.view}, moved: false}; });
  window.addEventListener("mouseup", () => { if (drag && drag.moved) request(st); drag = null; });
  cv.addEventListener("mousemove", e => {
    const rect = cv.getBoundingClientRect(), x = e.clientX - rect.left, y = e.clientY - rect.top;
    if (drag) {
      const dx = e.clientX - drag.x;
      if (Math.abs(dx) > 2) drag.moved = true;
      const span = drag.v.t1 - drag.v.t0, d = -dx / (cv.clientWidth - LABEL_W) * span;
      st.view = clamp(drag.v.t0 + d, drag.v.t1 + d, st.payload.head.end);
      draw(st);
      return;
    }
    const h = hit(st, x, y);
    st.hover = h ? h.i : -1; st.hoverRow = h ? h.row : null;
    if (h) {
      st.tip.innerHTML = tipHtml(st, h.i);
      st.tip.hidden = false;
      const bx = box.getBoundingClientRect();
      st.tip.style.left = Math.min(e.clientX - bx.left + 14, bx.width - 330) + "px";
      st.tip.style.top = (e.clientY - bx.top + 14) + "px";
    } else st.tip.hidden = true;
    draw(st);
  });
  cv.addEventListener("mouseleave", () => { st.tip.hidden = true; st.hover = -1; draw(st); });
  cv.addEventListener("click", e => {
    if (drag && drag.moved) return;
    const rect = cv.getBoundingClientRect();
    const h = hit(st, e.clientX - rect.left, e.clientY - rect.top);
    if (!h) return;
    const {head, arr} = st.payload;
    if (arr.count[h.i] > 1) {         // a merged mark: zoom to it
      st.view = clamp(arr.start[h.i] - (arr.end[h.i] - arr.start[h.i]) * 4, arr.end[h.i] + (arr.end[h.i] - arr.start[h.i]) * 4, head.end);
      draw(st); request(st, true); return;
    }
    st.sel = {src: head.srcs[arr.src[h.i]], row: arr.row[h.i]};
    draw(st);
    st.trigger("select", {src: st.sel.src, row: st.sel.row, t0: st.view.t0, t1: st.view.t1});
  });
  cv.addEventListener("dblclick", e => {
    const rect = cv.getBoundingClientRect();
    zoom(st, 0.5, tOf(st, e.clientX - rect.left, cv.clientWidth)); draw(st); request(st);
  });
  box.addEventListener("keydown", e => {
    if (!st.payload) return;
    const v = st.view, span = v.t1 - v.t0, k = e.key.toLowerCase();
    if (k === "w") zoom(st, 0.7); else if (k === "s") zoom(st, 1 / 0.7);
    else if (k === "a") st.view = clamp(v.t0 - span * 0.2, v.t1 - span * 0.2, st.payload.head.end);
    else if (k === "d") st.view = clamp(v.t0 + span * 0.2, v.t1 + span * 0.2, st.payload.head.end);
    else return;
    e.preventDefault(); draw(st); request(st);
  });
  box.querySelector(".ks-tl-color").addEventListener("click", e => {
    const c = e.target && e.target.dataset && e.target.dataset.c;
    if (!c || !st.payload || c === st.color) return;
    st.color = c;
    legend(st); draw(st);
    st.setState("color", c);
  });
  box.querySelector(".ks-tl-bar").addEventListener("click", e => {
    const a = e.target && e.target.dataset && e.target.dataset.a;
    if (!a || !st.payload) return;
    const v = st.view, span = v.t1 - v.t0, end = st.payload.head.end;
    if (a === "in") zoom(st, 0.5); else if (a === "out") zoom(st, 2);
    else if (a === "left") st.view = clamp(v.t0 - span * 0.5, v.t1 - span * 0.5, end);
    else if (a === "right") st.view = clamp(v.t0 + span * 0.5, v.t1 + span * 0.5, end);
    else if (a === "reset") st.view = {t0: 0, t1: end};
    draw(st); request(st, true);
  });
  if (window.ResizeObserver) new ResizeObserver(() => draw(st)).observe(box);
}

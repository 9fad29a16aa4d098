// Kernelscope's interactive table: a plain HTML table of pre-formatted cells (the same text the HTML export shows).
// A click on a header asks the page to sort by that column (again: the other direction); a click on a row selects
// it. Both go to Python as trigger values ("sort": {key, desc}; "select": the row's id) and from there into the URL.
// Keyboard: rows and headers take the focus (Tab); Enter or Space selects a row or sorts by a header, the arrow keys
// move between rows. A long name is shortened on one line (head … tail, dashboard.web.reports.blocks.shorten); hovering
// shows it whole. The box shows at least 8 rows (or all) before it scrolls. A table wider than its box (many columns
// on a narrow window) leaves out its last columns until it fits, from the right, never the first three, and says
// which (the HTML export and a wider window show them); it never scrolls sideways.
// A long table comes with its first 50 rows (and down to the selected one; data.total says how many it has) and a
// button for the rest, which asks the page for them ("more"): 1,500 rows are 20,000 cells, which take the browser
// about a second to receive and lay out.
function esc(s) {
  return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
}

// a link column's value is followed only when it is an http(s) URL or a path on this server (never javascript:,
// data: or another scheme, nor a scheme-relative //host); anything else is shown as text
function safeHref(v) {
  const s = String(v).trim();
  if (/^https?:\/\//i.test(s)) return s;
  if (/^[a-z][a-z0-9+.\-]*:/i.test(s) || s.startsWith("//") || /[\u0000-\u001f]/.test(s)) return null;
  return s;
}

export default function(component) {
  const {data, parentElement, setTriggerValue} = component;
  if (!data) return;
  let box = parentElement.querySelector(".ks-table");
  if (!box) {
    box = document.createElement("div");
    box.className = "ks-table";
    parentElement.appendChild(box);
    box.addEventListener("keydown", e => {
      const tr = e.target.closest("tr[data-id]"), th = e.target.closest(".ks-select th[data-key]");
      if ((e.key === "Enter" || e.key === " ") && (tr || th)) { e.preventDefault(); e.target.click(); return; }
      if (tr && (e.key === "ArrowDown" || e.key === "ArrowUp")) {
        const next = e.key === "ArrowDown" ? tr.nextElementSibling : tr.previousElementSibling;
        if (next) { e.preventDefault(); next.focus(); }
      }
    });
    box.addEventListener("click", e => {
      if (e.target.closest("a")) return;                 // a link cell: the browser follows it
      if (e.target.closest("button.ks-more")) { setTriggerValue("more", true); return; }
      const th = e.target.closest(".ks-select th[data-key]");
      if (th) {
        const key = th.dataset.key, d = box.__data;
        setTriggerValue("sort", {key, desc: key === d.sort ? !d.desc : th.dataset.num === "1"});
        return;
      }
      const tr = e.target.closest("tr[data-id]");
      if (tr) {
        box.querySelectorAll("tr.sel").forEach(r => r.classList.remove("sel"));
        tr.classList.add("sel");
        setTriggerValue("select", tr.dataset.id);
      }
    });
  }
  box.__data = data;
  draw(box);
  if (!box.__fit && window.ResizeObserver) {
    box.__fit = new ResizeObserver(() => fit(box));
    box.__fit.observe(box);
  }
}

// leave out the last columns (never the first three) while the table is wider than its box; say which
function fit(box) {
  const w = box.clientWidth;
  if (!w || box.__fitWidth === w) return;
  box.__fitWidth = w;
  box.querySelectorAll(".ks-hid").forEach(e => e.classList.remove("ks-hid"));
  const ths = [...box.querySelectorAll("thead th")], hidden = [];
  for (let j = ths.length - 1; j >= 3 && box.scrollWidth > box.clientWidth + 1; j--) {
    box.querySelectorAll(`tr > :nth-child(${j + 1})`).forEach(c => c.classList.add("ks-hid"));
    hidden.unshift(ths[j].textContent.replace(/ [▲▼]$/, ""));
  }
  let note = box.querySelector(".ks-cols");
  if (!hidden.length) { if (note) note.remove(); return; }
  if (!note) { note = document.createElement("div"); note.className = "ks-cols"; box.appendChild(note); }
  note.textContent = `Not shown at this width: ${hidden.join(", ")} (a wider window or Download HTML shows every column).`;
}

function draw(box) {
  const data = box.__data;
  const cols = data.columns;
  const head = cols.map(c => {
    const arrow = data.sort && c.key === data.sort ? (data.desc ? " ▼" : " ▲") : "";
    const focus = data.ids && data.ids.length ? ' tabindex="0"' : "";
    return `<th data-key="${esc(c.key)}" data-num="${c.num ? 1 : 0}" title="${esc(c.help || "")}" class="${c.num ? "n" : ""}"${focus}>` +
      `${esc(c.header)}${arrow}</th>`;
  }).join("");
  const selectable = data.ids && data.ids.length > 0;
  box.classList.toggle("ks-select", selectable);
  const shown = data.rows.length, total = data.total || shown;
  const body = data.rows.map((r, i) => {
    const id = selectable ? data.ids[i] : null;
    const sel = selectable && String(id) === String(data.selected) ? ' class="sel"' : "";
    return (selectable ? `<tr data-id="${esc(id)}" tabindex="0"${sel}>` : "<tr>") + r.map((v, j) => {
      const c = cols[j], tips = (data.titles || {})[c.key];
      const t = c.full ? ` title="${esc(data.full[i] || (tips ? tips[i] : v))}"`
        : (tips ? ` title="${esc(tips[i])}"` : (!c.link && String(v).length > 60 ? ` title="${esc(v)}"` : ""));
      const href = c.link && v ? safeHref(v) : null;
      const cell = c.link ? (href ? `<a href="${esc(href)}" target="_self">${esc(c.link_text || v)}</a>` : (v ? esc(v) : "—"))
        : esc(v);
      const cls = c.num ? "n" : (c.cls === "name" ? "w" : (c.cls === "prose" ? "p" : (c.cls === "prose-wide" ? "p pw" : "s")));
      return `<td class="${cls}"${t}>${cell}</td>`;
    }).join("") + "</tr>";
  }).join("");
  box.style.maxHeight = data.height ? data.height + "px" : "none";
  const more = shown < total ? `<div class="ks-foot">rows 1–${shown.toLocaleString("en-US")} of ` +
    `${total.toLocaleString("en-US")} <button type="button" class="ks-more">Show all rows</button></div>` : "";
  box.innerHTML = `<table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>${more}`;
  box.__fitWidth = 0;
  fit(box);
  // at least 8 rows (or all) in view: rows that wrap a sentence are taller than the height the page asked for
  const trs = box.querySelectorAll("tbody tr");
  if (data.height && trs.length) {
    const top = box.querySelector("table").getBoundingClientRect().top;
    const nth = trs[Math.min(8, trs.length) - 1].getBoundingClientRect().bottom - top + 2;
    if (nth > data.height) box.style.maxHeight = Math.ceil(nth) + "px";
  }
  const sel = box.querySelector("tr.sel");
  if (sel && !box.__scrolled) {          // bring the selected row into the box's view, never scrolling the page
    box.__scrolled = true;
    const b = box.getBoundingClientRect(), r = sel.getBoundingClientRect();
    if (r.bottom > b.bottom || r.top < b.top + 40) box.scrollTop += r.top - b.top - box.clientHeight / 2;
  }
}

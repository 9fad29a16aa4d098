// Kernelscope's interactive table: a plain HTML table of pre-formatted cells (the same text the HTML export shows).
// A click on a header asks the page to sort by that column (again: the other direction); a click on a row selects
// it. Both go to Python as trigger values ("sort": {key, desc}; "select": the row's id) and from there into the URL.
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
}

function draw(box) {
  const data = box.__data;
  const cols = data.columns;
  const head = cols.map(c => {
    const arrow = data.sort && c.key === data.sort ? (data.desc ? " ▼" : " ▲") : "";
    return `<th data-key="${esc(c.key)}" data-num="${c.num ? 1 : 0}" title="${esc(c.help || "")}" class="${c.num ? "n" : ""}">` +
      `${esc(c.header)}${arrow}</th>`;
  }).join("");
  const selectable = data.ids && data.ids.length > 0;
  box.classList.toggle("ks-select", selectable);
  const shown = data.rows.length, total = data.total || shown;
  const body = data.rows.map((r, i) => {
    const id = selectable ? data.ids[i] : null;
    const sel = selectable && String(id) === String(data.selected) ? ' class="sel"' : "";
    return (selectable ? `<tr data-id="${esc(id)}"${sel}>` : "<tr>") + r.map((v, j) => {
      const c = cols[j];
      const t = c.full ? ` title="${esc(data.full[i] || v)}"` : (!c.link && String(v).length > 60 ? ` title="${esc(v)}"` : "");
      const href = c.link && v ? safeHref(v) : null;
      const cell = c.link ? (href ? `<a href="${esc(href)}" target="_self">${esc(c.link_text || v)}</a>` : (v ? esc(v) : "—"))
        : esc(v);
      return `<td class="${c.num ? "n" : ""}${c.wide ? " w" : ""}"${t}>${cell}</td>`;
    }).join("") + "</tr>";
  }).join("");
  box.style.maxHeight = data.height ? data.height + "px" : "none";
  const more = shown < total ? `<div class="ks-foot">rows 1–${shown.toLocaleString("en-US")} of ` +
    `${total.toLocaleString("en-US")} <button type="button" class="ks-more">Show all rows</button></div>` : "";
  box.innerHTML = `<table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>${more}`;
  const sel = box.querySelector("tr.sel");
  if (sel && !box.__scrolled) { box.__scrolled = true; sel.scrollIntoView({block: "nearest"}); }
}

//! The HTML around the timeline: one self-contained page (inline CSS and script, nothing fetched
//! from the network), so a CI artifact opens from disk anywhere.

use quick_xml::escape::escape;
use std::fmt::Write as _;

/// The stylesheet every page shares.
const CSS: &str = r#"
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; background: #fff; }
h1 { font-size: 1.4em; margin: 0 0 .2em; }
.sub { color: #555; margin: 0 0 1em; }
.verdict { font-weight: bold; font-size: 1.1em; padding: .4em .6em; border-radius: 4px; display: inline-block; }
.verdict.pass { background: #e3f4e3; color: #1b5e20; }
.verdict.fail { background: #fde2e1; color: #b71c1c; }
table { border-collapse: collapse; margin: .6em 0 1.2em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.violation, td.failed { color: #b71c1c; font-weight: bold; }
td.safe, td.passed { color: #1b5e20; }
td.skipped { color: #777; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; }
code.replay { user-select: all; }
#timeline svg { font: 11px system-ui, sans-serif; }
.lane-bg { fill: #fafafa; stroke: #e0e0e0; }
.lane-label { font-weight: bold; }
.lane-note { fill: #666; }
.span.waiting { fill: #ffe082; }
.span.holding { fill: #90caf9; }
.span.section { fill: #1e88e5; }
.span.lease { fill: none; stroke: #43a047; stroke-width: 1.5; stroke-dasharray: 4 2; }
.span.paused { fill: #9e9e9e; }
.span.partitioned { fill: #ce93d8; }
.span.master { fill: #a5d6a7; }
.span.replica { fill: #e0e0e0; }
.span.leader { fill: #80cbc4; }
.span.follower { fill: #cfd8dc; }
.span.standalone { fill: #c5e1a5; }
.span.killed { fill: #424242; }
.mark.write { fill: #00695c; }
.mark.rejected { fill: #ff6f00; }
.mark.crash { fill: #000; }
.mark.clock { fill: #6a1b9a; }
.mark.expiry { fill: #c62828; }
.mark.revoked { fill: #ad1457; }
.overlap { fill: rgba(229, 57, 53, .35); stroke: #e53935; stroke-width: 2; }
.fault { stroke: #d84315; stroke-dasharray: 3 3; }
.fault-label { fill: #d84315; font-weight: bold; }
.axis { stroke: #999; }
.legend span { display: inline-block; margin-right: 1em; }
.legend i { display: inline-block; width: 1.4em; height: .8em; margin-right: .3em; vertical-align: middle; border: 1px solid #999; }
tr.violating-step td { background: #fde2e1; }
"#;

/// The script that draws the timeline from the JSON in `#timeline-data` into `#timeline`.
const TIMELINE_JS: &str = r#"
(function () {
  const data = JSON.parse(document.getElementById('timeline-data').textContent);
  const host = document.getElementById('timeline');
  const NS = 'http://www.w3.org/2000/svg';
  const ROW = 14, GAP = 10, LEFT = 170, TOP = 34, RIGHT = 20;
  const width = Math.max(900, host.clientWidth || 1200);
  const end = Math.max(1, data.end_us);
  const x = (us) => LEFT + (width - LEFT - RIGHT) * us / end;
  const el = (name, attrs, parent, text) => {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  };
  const titled = (e, t) => { if (t) el('title', {}, e, t); return e; };
  const svg = el('svg', { xmlns: NS, width: width });
  const top = {};
  let y = TOP;
  for (const lane of data.lanes) {
    const rows = 1 + Math.max(0, ...lane.spans.map((s) => s.row));
    const h = Math.max(lane.kind === 'client' ? 4 : 2, rows) * ROW + 8;
    const g = el('g', { class: 'lane ' + lane.kind, id: 'lane-' + lane.name, 'data-name': lane.name }, svg);
    el('rect', { class: 'lane-bg', x: LEFT, y: y, width: width - LEFT - RIGHT, height: h }, g);
    el('text', { class: 'lane-label', x: 4, y: y + 14 }, g, lane.name);
    if (lane.note) el('text', { class: 'lane-note', x: 4, y: y + 28 }, g, lane.note.slice(0, 28));
    for (const s of lane.spans) {
      const w = Math.max(1, x(s.to_us) - x(s.from_us));
      titled(el('rect', { class: 'span ' + s.kind, x: x(s.from_us), y: y + 4 + s.row * ROW,
        width: w, height: ROW - 3 }, g), s.title);
    }
    for (const m of lane.marks) {
      const mx = x(m.at_us), my = y + 4 + ROW + ROW / 2;
      const mg = el('g', { class: 'mark-group' }, g);
      titled(el('path', { class: 'mark ' + m.kind,
        d: `M${mx} ${my - 6} L${mx + 5} ${my} L${mx} ${my + 6} L${mx - 5} ${my} Z` }, mg), m.title);
      el('text', { class: 'mark-label', x: mx + 6, y: my + 16 }, mg, m.label);
    }
    top[lane.name] = [y, y + h];
    y += h + GAP;
  }
  const bottom = y;
  data.overlaps.forEach((o, i) => {
    const a = top[o.first], b = top[o.second];
    if (!a || !b) return;
    const y0 = Math.min(a[0], b[0]), y1 = Math.max(a[1], b[1]);
    titled(el('rect', { class: 'overlap', id: 'overlap-' + i, x: x(o.from_us), y: y0,
      width: Math.max(2, x(o.to_us) - x(o.from_us)), height: y1 - y0 }, svg), o.title);
  });
  for (const f of data.faults) {
    const fg = el('g', { class: 'fault-marker', id: 'fault-' + f.n }, svg);
    titled(el('line', { class: 'fault', x1: x(f.at_us), x2: x(f.at_us), y1: TOP - 12, y2: bottom }, fg), f.what);
    el('text', { class: 'fault-label', x: x(f.at_us) + 2, y: TOP - 14 }, fg, String(f.n));
  }
  el('line', { class: 'axis', x1: LEFT, x2: width - RIGHT, y1: bottom, y2: bottom }, svg);
  const step = Math.pow(10, Math.floor(Math.log10(end / 1000 / 4 || 1)));
  const stepUs = Math.max(1, step * 1000) * (end / (step * 1000) > 20 ? 5 : 1);
  for (let t = 0; t <= end; t += stepUs) {
    el('line', { class: 'axis', x1: x(t), x2: x(t), y1: bottom, y2: bottom + 5 }, svg);
    el('text', { class: 'tick', x: x(t) - 8, y: bottom + 17 }, svg, (t / 1000) + ' ms');
  }
  svg.setAttribute('height', bottom + 26);
  host.appendChild(svg);
  host.setAttribute('data-rendered', 'true');
})();
"#;

/// Escapes text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    escape(s).into_owned()
}

/// A whole page: `<head>` with the shared style, then `body` (already HTML).
pub fn document(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"generator\" content=\"lockcheck\">\n<title>{}</title>\n<style>{CSS}</style>\n\
         </head>\n<body>\n{body}</body>\n</html>\n",
        esc(title)
    )
}

/// The timeline block: legend, the drawing's host, its data and the script that draws it.
pub fn timeline(data: &serde_json::Value) -> String {
    // `</` inside the JSON must not close the script element.
    let json = serde_json::to_string(data)
        .unwrap_or_default()
        .replace("</", "<\\/");
    let mut out = String::new();
    out.push_str("<h2>Timeline</h2>\n<p class=\"legend\">");
    for (class, what) in [
        ("waiting", "waiting for the lock"),
        ("holding", "holding"),
        ("section", "critical section"),
        ("lease", "believed lease"),
        ("paused", "paused"),
        ("partitioned", "partitioned"),
        ("master", "master"),
        ("replica", "replica"),
        ("leader", "leader"),
        ("follower", "follower"),
        ("standalone", "standalone"),
        ("killed", "killed"),
    ] {
        let _ = write!(
            out,
            "<span><i class=\"swatch {class}\" style=\"background:{}\"></i>{what}</span>",
            swatch(class)
        );
    }
    out.push_str(
        "<span><i style=\"background:rgba(229,57,53,.35);border-color:#e53935\"></i>two holders</span>\
         <span>◆ resource write (#fencing token)</span>\
         <span><b style=\"color:#c62828\">◆</b> a server expired a session, revoked leases</span><span style=\"color:#d84315\">┆ fault</span></p>\n",
    );
    let _ = writeln!(
        out,
        "<div id=\"timeline\"><noscript>The timeline needs JavaScript; the history is below.</noscript></div>\n\
         <script id=\"timeline-data\" type=\"application/json\">{json}</script>\n<script>{TIMELINE_JS}</script>"
    );
    out
}

/// The legend's colour for a span class (the CSS draws the timeline itself).
fn swatch(class: &str) -> &'static str {
    match class {
        "waiting" => "#ffe082",
        "holding" => "#90caf9",
        "section" => "#1e88e5",
        "lease" => "#fff;border:1.5px dashed #43a047",
        "paused" => "#9e9e9e",
        "partitioned" => "#ce93d8",
        "master" => "#a5d6a7",
        "replica" => "#e0e0e0",
        "leader" => "#80cbc4",
        "follower" => "#cfd8dc",
        "standalone" => "#c5e1a5",
        _ => "#424242",
    }
}

/// A table from a header row and body rows of (css class, cell HTML) pairs.
pub fn table(id: &str, head: &[&str], rows: &[Vec<(String, String)>]) -> String {
    let mut out = format!("<table id=\"{id}\">\n<tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>\n");
    for r in rows {
        out.push_str("<tr>");
        for (class, html) in r {
            if class.is_empty() {
                let _ = write!(out, "<td>{html}</td>");
            } else {
                let _ = write!(out, "<td class=\"{class}\">{html}</td>");
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    out
}

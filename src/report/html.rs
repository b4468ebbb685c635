//! `index.html`: the report as one self-contained page, beside `index.md` and made from it, so
//! both say exactly the same. Every plot is inlined (its SVG), links to a plot go to it on the
//! page, and the page loads nothing: no network, no other file (only the `summary.json` links
//! point beside it). The verdict matrix sorts (click a column) and filters (text, failing rows
//! only); a rate plot zooms (wheel or the buttons) and pans (drag), double click resets.
//!
//! The page checks itself when it loads: it counts its plots, resolves every `#` link and
//! records any script error, and writes what it found on `<html>` (`data-ready`,
//! `data-plots`, `data-broken-links`, `data-errors`), which the headless-browser test reads
//! (`tests/suite/report.rs`).

use std::fmt::Write as _;
use std::path::Path;

/// The page's style sheet.
const STYLE: &str = r#"
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1280px;padding:0 16px 48px;color:#111;line-height:1.45}
h1{font-size:1.7em}h2{border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:2em}
code{background:#f3f3f3;padding:1px 4px;border-radius:3px;font-size:.92em}
table{border-collapse:collapse;margin:8px 0;font-size:.85em}
th,td{border:1px solid #d0d0d0;padding:3px 6px}th{background:#f0f0f0}
table.matrix th{cursor:pointer;position:sticky;top:0}
td.fail{background:#fde0e0;font-weight:bold}td.pass{background:#e6f4e6}
blockquote{margin:8px 0;padding:4px 12px;border-left:4px solid #ccc;color:#333}
figure.plot{margin:12px 0}figure.plot svg{width:100%;height:auto;border:1px solid #ddd;background:#fff}
figure.zoom svg{cursor:grab}
.controls{font-size:.85em;margin:4px 0}.controls button{margin-right:4px}
#matrix-tools{margin:8px 0}#matrix-tools input[type=text]{width:24em}
li{margin:3px 0}
"#;

/// The page's script: the matrix's sorting and filtering, the rate plots' zoom, and the
/// self-check the browser test reads.
const SCRIPT: &str = r##"
(function(){
  var errors=[];
  window.addEventListener('error',function(e){errors.push(String(e.message||e));});
  var cerr=console.error;console.error=function(){errors.push(Array.prototype.join.call(arguments,' '));cerr.apply(console,arguments);};
  function text(c){return (c.textContent||'').trim();}
  // the verdict matrix: sort by a column, filter by text or failing rows
  var m=document.querySelector('table.matrix');
  if(m){
    var body=m.tBodies[0];
    Array.prototype.forEach.call(m.tHead.rows[0].cells,function(th,i){
      th.title='sort by '+text(th);
      th.addEventListener('click',function(){
        var asc=th.dataset.sort!=='asc';
        Array.prototype.forEach.call(m.tHead.rows[0].cells,function(o){delete o.dataset.sort;});
        th.dataset.sort=asc?'asc':'desc';
        var rows=Array.prototype.slice.call(body.rows);
        rows.sort(function(a,b){var x=text(a.cells[i]),y=text(b.cells[i]);return asc?x.localeCompare(y):y.localeCompare(x);});
        rows.forEach(function(r){body.appendChild(r);});
      });
    });
    var q=document.getElementById('matrix-filter'),f=document.getElementById('matrix-failing');
    var apply=function(){
      var s=q.value.toLowerCase(),only=f.checked,shown=0;
      Array.prototype.forEach.call(body.rows,function(r){
        var ok=(!s||r.textContent.toLowerCase().indexOf(s)>=0)&&(!only||r.querySelector('td.fail'));
        r.style.display=ok?'':'none';if(ok)shown++;
      });
      document.getElementById('matrix-count').textContent=shown+' of '+body.rows.length+' rows';
    };
    q.addEventListener('input',apply);f.addEventListener('change',apply);apply();
  }
  // rate plots: zoom (wheel, buttons) and pan (drag); double click resets
  Array.prototype.forEach.call(document.querySelectorAll('figure.zoom'),function(fig){
    var svg=fig.querySelector('svg');if(!svg)return;
    var v0=svg.getAttribute('viewBox').split(/\s+/).map(Number),v=v0.slice();
    var set=function(){svg.setAttribute('viewBox',v.join(' '));};
    var zoom=function(k,cx,cy){
      var w=Math.min(v0[2],Math.max(v0[2]/50,v[2]*k)),h=Math.min(v0[3],Math.max(v0[3]/50,v[3]*k));
      v[0]=Math.min(Math.max(v0[0],cx-(cx-v[0])*w/v[2]),v0[0]+v0[2]-w);
      v[1]=Math.min(Math.max(v0[1],cy-(cy-v[1])*h/v[3]),v0[1]+v0[3]-h);v[2]=w;v[3]=h;set();
    };
    var at=function(e){var r=svg.getBoundingClientRect();return [v[0]+(e.clientX-r.left)/r.width*v[2],v[1]+(e.clientY-r.top)/r.height*v[3]];};
    svg.addEventListener('wheel',function(e){e.preventDefault();var p=at(e);zoom(e.deltaY<0?0.8:1.25,p[0],p[1]);},{passive:false});
    var drag=null;
    svg.addEventListener('mousedown',function(e){drag=[e.clientX,e.clientY,v[0],v[1]];});
    window.addEventListener('mouseup',function(){drag=null;});
    svg.addEventListener('mousemove',function(e){if(!drag)return;var r=svg.getBoundingClientRect();
      v[0]=Math.min(Math.max(v0[0],drag[2]-(e.clientX-drag[0])/r.width*v[2]),v0[0]+v0[2]-v[2]);
      v[1]=Math.min(Math.max(v0[1],drag[3]-(e.clientY-drag[1])/r.height*v[3]),v0[1]+v0[3]-v[3]);set();});
    svg.addEventListener('dblclick',function(){v=v0.slice();set();});
    fig.querySelector('.zoom-in').addEventListener('click',function(){zoom(0.5,v[0]+v[2]/2,v[1]+v[3]/2);});
    fig.querySelector('.zoom-out').addEventListener('click',function(){zoom(2,v[0]+v[2]/2,v[1]+v[3]/2);});
    fig.querySelector('.zoom-reset').addEventListener('click',function(){v=v0.slice();set();});
  });
  // the self-check: plots present, every link on the page resolves, no script error
  var broken=[];
  Array.prototype.forEach.call(document.querySelectorAll('a[href^="#"]'),function(a){
    var id=decodeURIComponent(a.getAttribute('href').slice(1));
    if(!document.getElementById(id))broken.push(a.getAttribute('href'));
  });
  var plots=document.querySelectorAll('figure.plot svg').length;
  var h=document.documentElement;
  h.dataset.plots=String(plots);
  h.dataset.brokenLinks=broken.join(' ');
  setTimeout(function(){h.dataset.errors=errors.join(' | ');h.dataset.ready='1';},0);
})();
"##;

/// The HTML of `md` (the `index.md` [`super::index::markdown`] wrote), its plots read from
/// `out` and inlined. A plot file that cannot be read is named in its place (and fails the
/// page's plot count).
pub fn page(md: &str, out: &Path) -> String {
    let mut html = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n\
         <title>pacesim reports</title>\n<style>",
    );
    html.push_str(STYLE);
    html.push_str("</style>\n</head>\n<body>\n");
    let lines: Vec<&str> = md.lines().collect();
    let mut i = 0;
    let mut images = 0usize;
    while i < lines.len() {
        let l = lines[i];
        if l.trim().is_empty() {
            i += 1;
        } else if let Some(h) = heading(l) {
            let (level, t) = h;
            let _ = writeln!(html, "<h{level} id=\"{}\">{}</h{level}>", anchor_of(t), inline(t));
            i += 1;
        } else if l.starts_with('|') {
            let start = i;
            while i < lines.len() && lines[i].starts_with('|') {
                i += 1;
            }
            table(&mut html, &lines[start..i]);
        } else if l.starts_with("- ") {
            html.push_str("<ul>\n");
            while i < lines.len() && (lines[i].starts_with("- ") || lines[i].starts_with("  - ") || lines[i].is_empty())
            {
                // a blank line inside a list continues it when the next line is an item
                if lines[i].is_empty() {
                    if lines
                        .get(i + 1)
                        .is_some_and(|n| n.starts_with("- ") || n.starts_with("  - "))
                    {
                        i += 1;
                        continue;
                    }
                    break;
                }
                let item = lines[i].trim_start_matches("- ");
                let _ = write!(html, "<li>{}", inline(item));
                i += 1;
                let mut sub = false;
                while i < lines.len() && lines[i].starts_with("  - ") {
                    if !sub {
                        html.push_str("\n<ul>\n");
                        sub = true;
                    }
                    let _ = writeln!(html, "<li>{}</li>", inline(&lines[i][4..]));
                    i += 1;
                }
                if sub {
                    html.push_str("</ul>");
                }
                html.push_str("</li>\n");
            }
            html.push_str("</ul>\n");
        } else if let Some(q) = l.strip_prefix("> ") {
            let _ = writeln!(html, "<blockquote>{}</blockquote>", inline(q));
            i += 1;
        } else if let Some((caption, src)) = image(l) {
            images += 1;
            figure(&mut html, caption, src, out);
            i += 1;
        } else if l.starts_with("```") {
            i += 1;
            html.push_str("<pre><code>");
            while i < lines.len() && !lines[i].starts_with("```") {
                let _ = writeln!(html, "{}", escape(lines[i]));
                i += 1;
            }
            i += 1;
            html.push_str("</code></pre>\n");
        } else {
            let _ = writeln!(html, "<p>{}</p>", inline(l));
            i += 1;
        }
    }
    let _ = write!(
        html,
        "<script data-images=\"{images}\">{SCRIPT}</script>\n</body>\n</html>\n"
    );
    html
}

/// `# t` to `### t`.
fn heading(l: &str) -> Option<(usize, &str)> {
    let level = l.bytes().take_while(|&b| b == b'#').count();
    ((1..=4).contains(&level) && l.as_bytes().get(level) == Some(&b' ')).then(|| (level, &l[level + 1..]))
}

/// The id of a heading: GitHub's anchor of its text (the links `index.md` writes).
fn anchor_of(t: &str) -> String {
    let plain = t.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">");
    plain
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '_' => Some(c),
            ' ' => Some('-'),
            _ => None,
        })
        .collect()
}

/// `![caption](src)` alone on a line.
fn image(l: &str) -> Option<(&str, &str)> {
    let rest = l.strip_prefix("![")?;
    let (caption, rest) = rest.split_once("](")?;
    let src = rest.strip_suffix(')')?;
    Some((caption, src))
}

/// The id a plot gets on the page: `plot-<dir>-<stem>`.
fn plot_id(src: &str) -> String {
    let stem = src.trim_end_matches(".svg").trim_end_matches(".png");
    format!("plot-{}", stem.replace(['/', '.'], "-"))
}

/// A plot, its SVG inlined; a rate plot with zoom controls.
fn figure(html: &mut String, caption: &str, src: &str, out: &Path) {
    let zoom = src.ends_with("/rate.svg");
    let _ = write!(
        html,
        "<figure class=\"plot{}\" id=\"{}\">",
        if zoom { " zoom" } else { "" },
        plot_id(src)
    );
    if zoom {
        html.push_str(
            "<div class=\"controls\"><button class=\"zoom-in\" type=\"button\">zoom in</button>\
             <button class=\"zoom-out\" type=\"button\">zoom out</button>\
             <button class=\"zoom-reset\" type=\"button\">reset</button> \
             (wheel to zoom, drag to pan, double click to reset)</div>",
        );
    }
    match std::fs::read_to_string(out.join(src)) {
        Ok(svg) => {
            // the XML declaration, if any, cannot sit inside HTML
            let svg = svg.trim_start();
            let svg = match svg.strip_prefix("<?xml") {
                Some(rest) => rest.split_once("?>").map_or(rest, |r| r.1),
                None => svg,
            };
            let svg = svg.replacen(
                "<svg ",
                &format!("<svg role=\"img\" aria-label=\"{}\" ", escape(caption)),
                1,
            );
            html.push_str(&svg);
        }
        Err(e) => {
            let _ = write!(
                html,
                "<p><strong>missing plot {}: {}</strong></p>",
                escape(src),
                escape(&e.to_string())
            );
        }
    }
    html.push_str("</figure>\n");
}

/// A Markdown table; the verdict matrix (its header starts `| scenario | backend |`) gets the
/// sort and filter controls and its cells a class by verdict.
fn table(html: &mut String, rows: &[&str]) {
    let cells = |l: &str| -> Vec<String> {
        let l = l.trim().trim_start_matches('|').trim_end_matches('|');
        l.split('|').map(|c| c.trim().to_string()).collect()
    };
    let Some(head) = rows.first() else {
        return;
    };
    let matrix = head.starts_with("| scenario | backend |");
    if matrix {
        html.push_str(
            "<div id=\"matrix-tools\"><label>filter: <input id=\"matrix-filter\" type=\"text\" \
             placeholder=\"scenario, backend or verdict\"></label> <label><input id=\"matrix-failing\" \
             type=\"checkbox\"> failing rows only</label> <span id=\"matrix-count\"></span></div>\n",
        );
        html.push_str("<table class=\"matrix\">\n<thead><tr>");
    } else {
        html.push_str("<table>\n<thead><tr>");
    }
    for c in cells(head) {
        let _ = write!(html, "<th>{}</th>", inline(&c));
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    for r in rows.iter().skip(2) {
        html.push_str("<tr>");
        for c in cells(r) {
            let class = if !matrix {
                ""
            } else if c.contains("FAIL") {
                " class=\"fail\""
            } else if c == "pass" {
                " class=\"pass\""
            } else {
                ""
            };
            let _ = write!(html, "<td{class}>{}</td>", inline(&c));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody>\n</table>\n");
}

/// `<`, `>`, `&` and `"` as entities.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Inline Markdown (already entity-escaped where it came from a scenario file): code spans,
/// `**bold**`, `*emphasis*`, `[text](href)`. A link to a plot goes to it on the page.
fn inline(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('`')
            && let Some(end) = r.find('`')
        {
            // a code span's text is literal: escape what index.md left raw
            let code = r[..end].replace('<', "&lt;").replace('>', "&gt;");
            let _ = write!(out, "<code>{code}</code>");
            rest = &r[end + 1..];
        } else if let Some(r) = rest.strip_prefix("**")
            && let Some(end) = r.find("**")
        {
            let _ = write!(out, "<strong>{}</strong>", inline(&r[..end]));
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('[')
            && let Some((text, after)) = link(r)
        {
            let (label, href) = text;
            let href = if href.ends_with(".svg") || href.ends_with(".png") {
                format!("#{}", plot_id(href))
            } else {
                href.to_string()
            };
            let _ = write!(out, "<a href=\"{}\">{}</a>", escape(&href), inline(label));
            rest = after;
        } else if let Some(r) = rest.strip_prefix('*')
            && !r.starts_with(' ')
            && let Some(end) = r.find('*')
            && end > 0
        {
            let _ = write!(out, "<em>{}</em>", inline(&r[..end]));
            rest = &r[end + 1..];
        } else {
            let c = rest.chars().next().expect("not empty");
            match c {
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                _ => out.push(c),
            }
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// After a `[`: `text](href)` and what follows it, the text allowed one level of brackets.
fn link(r: &str) -> Option<((&str, &str), &str)> {
    let mut depth = 0usize;
    let mut close = None;
    for (i, c) in r.char_indices() {
        match c {
            '[' => depth += 1,
            ']' if depth == 0 => {
                close = Some(i);
                break;
            }
            ']' => depth -= 1,
            _ => {}
        }
    }
    let close = close?;
    let after = r[close + 1..].strip_prefix('(')?;
    let end = after.find(')')?;
    Some(((&r[..close], &after[..end]), &after[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_html() {
        let md = "# t\n\n## Designs that fail\n\n- **row (clock=x)** in [a](#a): fails. Plot: [`a/rate.svg`](a/rate.svg).\n  - sub `x<y`\n\n| scenario | backend | ceiling |\n| --- | --- | :---: |\n| [a](#a) | row | **FAIL** |\n\n## a\n";
        let h = page(md, Path::new("/nonexistent"));
        assert!(h.contains("<h2 id=\"designs-that-fail\">Designs that fail</h2>"), "{h}");
        assert!(h.contains("<strong>row (clock=x)</strong>"), "{h}");
        assert!(
            h.contains("<a href=\"#plot-a-rate\"><code>a/rate.svg</code></a>"),
            "{h}"
        );
        assert!(h.contains("<li>sub <code>x&lt;y</code></li>"), "{h}");
        assert!(h.contains("<table class=\"matrix\">"), "{h}");
        assert!(h.contains("<td class=\"fail\"><strong>FAIL</strong></td>"), "{h}");
        assert!(h.contains("<h2 id=\"a\">a</h2>"), "{h}");
    }
}

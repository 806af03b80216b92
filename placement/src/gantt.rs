//! Gantt chart of a simulated schedule as an SVG string.

use std::fmt::Write;

use crate::graph::CostGraph;
use crate::sim::SimResult;
use crate::topology::Topology;

const ROW: f64 = 22.0;
const LEFT: f64 = 110.0;
const WIDTH: f64 = 1000.0;

fn colour(kind: &str) -> String {
    let h = kind.bytes().fold(2166136261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16777619)
    });
    format!("hsl({},60%,62%)", h % 360)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One row per (device, stream), operators coloured by kind with their name in a tooltip; one
/// row per link that carried copies, copies drawn as grey bars labelled with their producer.
pub fn gantt_svg(g: &CostGraph, t: &Topology, sim: &SimResult) -> String {
    let mut rows: Vec<(String, usize, usize)> = Vec::new();
    for (d, dev) in t.devices.iter().enumerate() {
        let used = sim
            .ops
            .iter()
            .filter(|o| o.device == d)
            .map(|o| o.stream + 1)
            .max()
            .unwrap_or(0);
        for s in 0..dev.streams.max(used) {
            let name = if dev.name.is_empty() {
                format!("dev{d}")
            } else {
                dev.name.clone()
            };
            rows.push((format!("{name} s{s}"), d, s));
        }
    }
    let mut links: Vec<(usize, usize)> = sim.copies.iter().map(|c| (c.src, c.dst)).collect();
    links.sort_unstable();
    links.dedup();
    let span = sim.makespan.max(1e-9);
    let x = |tm: f64| LEFT + tm / span * WIDTH;
    let h = (rows.len() + links.len()) as f64 * ROW + 40.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{h}" font-family="sans-serif" font-size="11">"#,
        LEFT + WIDTH + 20.0
    );
    let _ = writeln!(
        s,
        r#"<text x="4" y="14">makespan {:.1} µs, lower bound {:.1} µs</text>"#,
        sim.makespan, sim.lower_bound
    );
    for (i, (label, d, st)) in rows.iter().enumerate() {
        let y = 24.0 + i as f64 * ROW;
        let _ = writeln!(s, r#"<text x="4" y="{}">{}</text>"#, y + 14.0, esc(label));
        for (v, o) in sim.ops.iter().enumerate() {
            if o.device != *d || o.stream != *st {
                continue;
            }
            let op = g.ops.get(v);
            let kind = op.map_or("", |o| o.kind.as_str());
            let name = op.map_or(String::new(), |o| o.name.clone());
            let _ = writeln!(
                s,
                r#"<rect x="{:.2}" y="{y}" width="{:.2}" height="{}" fill="{}" stroke="black" stroke-width="0.3"><title>{} #{v} {:.1}–{:.1}</title></rect>"#,
                x(o.start),
                (x(o.finish) - x(o.start)).max(0.5),
                ROW - 4.0,
                colour(kind),
                esc(&name),
                o.start,
                o.finish
            );
        }
    }
    for (j, (a, b)) in links.iter().enumerate() {
        let y = 24.0 + (rows.len() + j) as f64 * ROW;
        let _ = writeln!(s, r#"<text x="4" y="{}">copy {a}→{b}</text>"#, y + 14.0);
        for c in sim.copies.iter().filter(|c| c.src == *a && c.dst == *b) {
            let _ = writeln!(
                s,
                r##"<rect x="{:.2}" y="{y}" width="{:.2}" height="{}" fill="#999"><title>copy of #{} {:.0} B {:.1}–{:.1}</title></rect>"##,
                x(c.start),
                (x(c.finish) - x(c.start)).max(0.5),
                ROW - 8.0,
                c.producer,
                c.bytes,
                c.start,
                c.finish
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

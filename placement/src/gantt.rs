//! Gantt chart of a simulated schedule as an SVG string.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::graph::{CostGraph, DeviceKind};
use crate::sim::SimResult;
use crate::topology::Topology;

/// Height of one row.
const ROW: f64 = 22.0;
/// Width of the row-label column.
const LEFT: f64 = 150.0;
/// Width of the time axis.
const WIDTH: f64 = 1000.0;
/// Space right of the axis (room for the last tick's label).
const RIGHT: f64 = 30.0;
/// Top of the time axis (below the title).
const AXIS: f64 = 40.0;
/// Top of the first row.
const TOP: f64 = AXIS + 8.0;
/// Estimated width of one character at font-size 11.
const CHAR_PX: f64 = 6.5;
/// Horizontal padding inside a bar around its label.
const PAD: f64 = 3.0;
/// The colour of copies.
const COPY_FILL: &str = "#999";

/// Light, distinct colours for the kinds in the legend's order (no grey: copies are grey).
const PALETTE: [&str; 18] = [
    "#7aa6d6", "#f5a35c", "#e87b7d", "#8fd0c9", "#7fc06f", "#f0d263", "#c59bbd", "#ffb3bb",
    "#b89680", "#a0cbe8", "#ffd1a1", "#c9d46b", "#b8e0af", "#f7e29c", "#e2c2dc", "#cfe7e4",
    "#d9c2b5", "#ffbdbb",
];

/// The colour of the `rank`-th kind of the legend: the palette's, then a hue from the kind's
/// name.
fn colour(rank: usize, kind: &str) -> String {
    if let Some(c) = PALETTE.get(rank) {
        return (*c).to_string();
    }
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

/// What fits of `name` in a bar `width` px wide: all of it, or its start and `…` when at
/// least three characters fit, or nothing.
fn fitted_label(name: &str, width: f64) -> Option<String> {
    let room = ((width - 2.0 * PAD) / CHAR_PX).floor();
    if room < 1.0 {
        return None;
    }
    let room = room as usize;
    let chars = name.chars().count();
    if chars == 0 {
        None
    } else if chars <= room {
        Some(name.to_string())
    } else if room >= 4 {
        Some(name.chars().take(room - 1).chain(['…']).collect())
    } else {
        None
    }
}

/// A tick spacing of 1, 2 or 5 × 10^k µs giving at most about ten ticks over `span`.
pub fn tick_step(span: f64) -> f64 {
    if !(span.is_finite() && span > 0.0) {
        return 1.0;
    }
    let raw = span / 10.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= raw)
        .unwrap_or(10.0 * magnitude)
}

/// A tick's label: as many decimals as the step needs.
fn tick_label(t: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{t:.decimals$} µs")
}

/// The name of device `d`, or `dev{d}` when it has none.
fn device_name(t: &Topology, d: usize) -> String {
    match t.devices.get(d) {
        Some(dev) if !dev.name.is_empty() => dev.name.clone(),
        _ => format!("dev{d}"),
    }
}

/// One row per (device, stream), labelled `NAME lane S` on a CPU and `NAME stream S` on a GPU,
/// operators coloured by kind with their name inside the bar where it fits (and always in a
/// tooltip); one row per link that carried copies, copies drawn as grey bars; a time axis in µs
/// with a tick grid above the rows and a legend of the operator kinds below them.
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
        let lane_word = match dev.kind {
            DeviceKind::Cpu => "lane",
            DeviceKind::Gpu => "stream",
        };
        for s in 0..dev.streams.max(used) {
            rows.push((format!("{} {lane_word} {s}", device_name(t, d)), d, s));
        }
    }
    let mut links: Vec<(usize, usize)> = sim.copies.iter().map(|c| (c.src, c.dst)).collect();
    links.sort_unstable();
    links.dedup();
    // Kinds in the legend: by total time on the chart, longest first, then by name.
    let mut kind_time: BTreeMap<&str, f64> = BTreeMap::new();
    for (v, o) in sim.ops.iter().enumerate() {
        let kind = g.ops.get(v).map_or("", |op| op.kind.as_str());
        *kind_time.entry(kind).or_default() += (o.finish - o.start).max(0.0);
    }
    let mut kinds: Vec<(&str, f64)> = kind_time.into_iter().collect();
    kinds.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let fill: BTreeMap<&str, String> = kinds
        .iter()
        .enumerate()
        .map(|(rank, (k, _))| (*k, colour(rank, k)))
        .collect();
    let mut legend: Vec<(String, String)> = kinds
        .iter()
        .map(|(k, _)| {
            let label = if k.is_empty() { "(no kind)" } else { k };
            (label.to_string(), fill[k].clone())
        })
        .collect();
    if !sim.copies.is_empty() {
        legend.push(("copy".to_string(), COPY_FILL.to_string()));
    }
    // Legend entries flow left to right and wrap at the chart's width.
    let mut legend_at: Vec<(f64, usize)> = Vec::with_capacity(legend.len());
    let (mut lx, mut line) = (0.0, 0usize);
    for (label, _) in &legend {
        let w = 14.0 + label.chars().count() as f64 * CHAR_PX + 16.0;
        if lx > 0.0 && lx + w > LEFT + WIDTH {
            lx = 0.0;
            line += 1;
        }
        legend_at.push((lx, line));
        lx += w;
    }
    let legend_lines = if legend.is_empty() { 0 } else { line + 1 };

    let span = sim.makespan.max(1e-9);
    let x = |tm: f64| LEFT + tm / span * WIDTH;
    let rows_bottom = TOP + (rows.len() + links.len()) as f64 * ROW;
    let legend_top = rows_bottom + 12.0;
    let h = legend_top + legend_lines as f64 * 18.0 + 8.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{h}" font-family="sans-serif" font-size="11">"#,
        LEFT + WIDTH + RIGHT
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="4" y="14">makespan {:.1} µs, lower bound {:.1} µs</text>"#,
        sim.makespan, sim.lower_bound
    );

    // The time axis: a line, ticks with µs labels and a light grid through the rows.
    let step = tick_step(span);
    let _ = writeln!(s, r#"<g class="axis">"#);
    let _ = writeln!(
        s,
        r#"<line x1="{LEFT}" y1="{AXIS}" x2="{}" y2="{AXIS}" stroke="black" stroke-width="0.8"/>"#,
        LEFT + WIDTH
    );
    let ticks = (span / step + 1e-9).floor() as usize;
    for i in 0..=ticks {
        let tm = i as f64 * step;
        let tx = x(tm);
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.2}" y1="{}" x2="{tx:.2}" y2="{rows_bottom}" stroke="#ddd" stroke-width="0.6"/>"##,
            AXIS
        );
        let _ = writeln!(
            s,
            r#"<line x1="{tx:.2}" y1="{}" x2="{tx:.2}" y2="{AXIS}" stroke="black" stroke-width="0.8"/>"#,
            AXIS - 4.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{tx:.2}" y="{}" text-anchor="middle">{}</text>"#,
            AXIS - 7.0,
            tick_label(tm, step)
        );
    }
    let _ = writeln!(s, "</g>");

    for (i, (label, d, st)) in rows.iter().enumerate() {
        let y = TOP + i as f64 * ROW;
        let _ = writeln!(
            s,
            r#"<text class="row" x="4" y="{}">{}</text>"#,
            y + 14.0,
            esc(label)
        );
        for (v, o) in sim.ops.iter().enumerate() {
            if o.device != *d || o.stream != *st {
                continue;
            }
            let op = g.ops.get(v);
            let kind = op.map_or("", |o| o.kind.as_str());
            let name = op.map_or(String::new(), |o| o.name.clone());
            let (x0, w) = (x(o.start), (x(o.finish) - x(o.start)).max(0.5));
            let _ = writeln!(
                s,
                r#"<rect class="op" x="{x0:.2}" y="{y}" width="{w:.2}" height="{}" fill="{}" stroke="black" stroke-width="0.3"><title>{} ({}) #{v} {:.1}–{:.1} µs</title></rect>"#,
                ROW - 4.0,
                fill.get(kind).map_or("white", String::as_str),
                esc(&name),
                esc(kind),
                o.start,
                o.finish
            );
            if let Some(text) = fitted_label(&name, w) {
                let _ = writeln!(
                    s,
                    r#"<text class="name" x="{:.2}" y="{}" pointer-events="none">{}</text>"#,
                    x0 + PAD,
                    y + 13.0,
                    esc(&text)
                );
            }
        }
    }
    for (j, (a, b)) in links.iter().enumerate() {
        let y = TOP + (rows.len() + j) as f64 * ROW;
        let _ = writeln!(
            s,
            r#"<text class="row" x="4" y="{}">copies {}→{}</text>"#,
            y + 14.0,
            esc(&device_name(t, *a)),
            esc(&device_name(t, *b))
        );
        for c in sim.copies.iter().filter(|c| c.src == *a && c.dst == *b) {
            let _ = writeln!(
                s,
                r#"<rect class="copy" x="{:.2}" y="{y}" width="{:.2}" height="{}" fill="{COPY_FILL}" stroke="white" stroke-width="0.6"><title>copy of #{} {:.0} B {:.1}–{:.1} µs</title></rect>"#,
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

    let _ = writeln!(s, r#"<g class="legend">"#);
    for ((label, fill), (lx, line)) in legend.iter().zip(&legend_at) {
        let ly = legend_top + *line as f64 * 18.0;
        let _ = writeln!(
            s,
            r#"<rect class="swatch" x="{:.1}" y="{ly}" width="10" height="10" fill="{fill}" stroke="black" stroke-width="0.3"/><text x="{:.1}" y="{}">{}</text>"#,
            4.0 + lx,
            4.0 + lx + 14.0,
            ly + 9.5,
            esc(label)
        );
    }
    let _ = writeln!(s, "</g>");
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_one_two_or_five_times_a_power_of_ten() {
        assert_eq!(tick_step(1000.0), 100.0);
        assert_eq!(tick_step(1234.0), 200.0);
        assert_eq!(tick_step(37.0), 5.0);
        assert!((tick_step(0.9) - 0.1).abs() < 1e-12);
        assert_eq!(tick_step(0.0), 1.0);
        assert_eq!(tick_label(0.2, 0.1), "0.2 µs");
        assert_eq!(tick_label(400.0, 200.0), "400 µs");
    }

    #[test]
    fn names_are_drawn_whole_cut_or_not_at_all() {
        // "conv_1" is 6 characters: 6 × 6.5 + 2 × 3 = 45 px.
        assert_eq!(fitted_label("conv_1", 45.0).as_deref(), Some("conv_1"));
        assert_eq!(fitted_label("conv_1", 40.0).as_deref(), Some("conv…"));
        assert_eq!(fitted_label("conv_1", 20.0), None);
        assert_eq!(fitted_label("", 500.0), None);
    }
}

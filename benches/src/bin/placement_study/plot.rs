//! A minimal SVG line plot (no dependency).

use std::fmt::Write as _;

/// Lines of (x, mean, sd) per series, with sd error bars.
pub fn lines(
    title: &str,
    xlabel: &str,
    ylabel: &str,
    names: &[&str],
    series: &[Vec<(f64, f64, f64)>],
) -> String {
    let (w, h, l, r, t, b) = (760.0, 440.0, 70.0, 150.0, 30.0, 50.0);
    let pts = series.iter().flatten();
    let xmin = pts.clone().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let xmax = pts.clone().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let ymax = pts.map(|p| p.1 + p.2).fold(0.0, f64::max) * 1.05;
    let sx = |x: f64| l + (x - xmin) / (xmax - xmin).max(1e-9) * (w - l - r);
    let sy = |y: f64| h - b - y / ymax.max(1e-9) * (h - t - b);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<text x="{}" y="18" font-size="14">{title}</text>"#, l);
    let _ = writeln!(
        s,
        r#"<line x1="{l}" y1="{}" x2="{}" y2="{}" stroke="black"/>"#,
        h - b,
        w - r,
        h - b
    );
    let _ = writeln!(
        s,
        r#"<line x1="{l}" y1="{t}" x2="{l}" y2="{}" stroke="black"/>"#,
        h - b
    );
    for i in 0..=5 {
        let y = ymax * i as f64 / 5.0;
        let _ = writeln!(s, r#"<text x="4" y="{:.1}">{y:.1}</text>"#, sy(y) + 4.0);
        let x = xmin + (xmax - xmin) * i as f64 / 5.0;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}">{x:.2}</text>"#,
            sx(x) - 10.0,
            h - b + 16.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}">{xlabel}</text>"#,
        (w - r) / 2.0,
        h - 8.0
    );
    let _ = writeln!(s, r#"<text x="4" y="{}">{ylabel}</text>"#, t - 8.0 + 4.0);
    for (i, (name, pts)) in names.iter().zip(series).enumerate() {
        if pts.is_empty() {
            continue;
        }
        let colour = format!("hsl({},70%,45%)", i * 360 / names.len().max(1));
        let path: Vec<String> = pts
            .iter()
            .map(|p| format!("{:.1},{:.1}", sx(p.0), sy(p.1)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
            path.join(" ")
        );
        for p in pts {
            let _ = writeln!(
                s,
                r#"<line x1="{0:.1}" x2="{0:.1}" y1="{1:.1}" y2="{2:.1}" stroke="{colour}"/>"#,
                sx(p.0),
                sy(p.1 - p.2),
                sy(p.1 + p.2)
            );
        }
        let ly = t + 14.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{}" y="{}" width="10" height="10" fill="{colour}"/><text x="{}" y="{}">{name}</text>"#,
            w - r + 10.0,
            ly,
            w - r + 24.0,
            ly + 9.0
        );
    }
    s.push_str("</svg>\n");
    s
}

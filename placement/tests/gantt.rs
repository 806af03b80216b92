//! The Gantt chart: a time axis, one labelled row per lane and per link, operator names inside
//! the bars that have room, and a legend of the operator kinds.

use spillway_placement::*;

/// `conv_stem` on the CPU, then `relu_a` and `wide_convolution` on two GPU streams (each fed
/// by a copy), and `concat_out` back on the CPU.
fn chart() -> (CostGraph, Topology, SimResult) {
    let op = |name: &str, kind: &str, us: f64| {
        let mut o = Op::new(name, &[(DeviceKind::Cpu, us), (DeviceKind::Gpu, us)]);
        o.kind = kind.to_string();
        o
    };
    let g = CostGraph {
        ops: vec![
            op("conv_stem", "Conv", 400.0),
            op("relu_a", "Relu", 40.0),
            op("wide_convolution", "Conv", 500.0),
            op("concat_out", "Concat", 300.0),
        ],
        edges: [(0, 1), (0, 2), (1, 3), (2, 3)]
            .into_iter()
            .map(|(src, dst)| Edge {
                src,
                dst,
                bytes: 4096.0,
            })
            .collect(),
        concurrency: Default::default(),
    };
    let t = Topology::full_mesh(
        vec![Device::cpu("cpu", 1), Device::gpu("cuda0", 2)],
        100.0,
        10.0,
    );
    let s = Schedule::from_sequence("hand", &[0, 1, 1, 0], &[0, 0, 1, 0], &[0, 1, 2, 3]);
    let r = simulate(&g, &t, &s).unwrap();
    (g, t, r)
}

#[test]
fn the_chart_has_an_axis_row_labels_op_names_and_a_legend() {
    let (g, t, r) = chart();
    let svg = gantt::gantt_svg(&g, &t, &r);
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches(r#"<rect class="op""#).count(), g.ops.len());
    assert_eq!(svg.matches(r#"<rect class="copy""#).count(), r.copies.len());
    assert!(!r.copies.is_empty());

    // The time axis: starts at 0 µs and has a tick within one step of the makespan.
    assert!(svg.contains(r#"<g class="axis">"#), "{svg}");
    assert!(svg.contains(">0 µs</text>"), "{svg}");
    let step = gantt::tick_step(r.makespan);
    let last = (r.makespan / step).floor() * step;
    assert!(
        svg.contains(&format!(">{last:.0} µs</text>")),
        "no tick at {last} µs (makespan {}):\n{svg}",
        r.makespan
    );

    // Row labels: the device's name and lane or stream, and one per link with copies.
    for row in [
        "cpu lane 0",
        "cuda0 stream 0",
        "cuda0 stream 1",
        "copies cpu→cuda0",
        "copies cuda0→cpu",
    ] {
        assert!(
            svg.contains(&format!(">{row}</text>")),
            "no row '{row}':\n{svg}"
        );
    }

    // Names inside the bars that have room for them; a long name in a short bar is cut.
    for name in ["conv_stem", "wide_convolution", "concat_out"] {
        assert!(
            svg.contains(&format!(r#"pointer-events="none">{name}</text>"#)),
            "no label {name}:\n{svg}"
        );
    }
    // relu_a runs 40 of about 1300 µs: some 30 px, too narrow for its name (its tooltip
    // still names it).
    assert!(!svg.contains(">relu_a</text>"), "{svg}");
    assert!(svg.contains("<title>relu_a (Relu)"), "{svg}");

    // The legend: every kind once, with its colour, and the copies.
    let legend = &svg[svg.find(r#"<g class="legend">"#).expect("a legend")..];
    for kind in ["Conv", "Relu", "Concat", "copy"] {
        assert_eq!(
            legend.matches(&format!(">{kind}</text>")).count(),
            1,
            "legend entry {kind}:\n{legend}"
        );
    }
    assert_eq!(legend.matches(r#"class="swatch""#).count(), 4);
}

//! Study: the graph a default session runs, one node per line (op, domain, name, each input's
//! and output's name and shape): `graph_dump MODEL.onnx [NAME-FILTER]`.
use spillway::Session;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        args.len() >= 2,
        "usage: graph_dump MODEL.onnx [NAME-FILTER]"
    );
    let session = Session::builder().commit_from_file(&args[1])?;
    let graph = session.graph();
    let shape = |v: &Option<spillway::graph::ValueId>| match v {
        Some(v) => {
            let info = graph.value(*v);
            match info.shape.as_deref() {
                Some(s) => format!("{}{s:?}", info.name),
                None => format!("{}(shape unknown)", info.name),
            }
        }
        None => "-".into(),
    };
    for node in &graph.nodes {
        if args.get(2).is_some_and(|f| !node.name.contains(f.as_str())) {
            continue;
        }
        let ins: Vec<String> = node.inputs.iter().map(shape).collect();
        let outs: Vec<String> = node.outputs.iter().map(shape).collect();
        println!(
            "{} {} {} {:?} in {} out {}",
            node.op_type,
            node.domain,
            node.name,
            node.attrs.names().collect::<Vec<_>>(),
            ins.join(" "),
            outs.join(" ")
        );
    }
    Ok(())
}

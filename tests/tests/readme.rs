//! The README's operator list is generated from the engine's op registry (kernels, control
//! flow, sequence and optional operators, and the contrib ops lowered at load); this keeps it
//! honest.

#[test]
fn readme_lists_exactly_the_supported_ops() {
    let readme =
        std::fs::read_to_string(spillway_tests::workspace_root().join("README.md")).unwrap();
    let start = readme
        .find("<!-- ops:start -->")
        .expect("README has the ops markers");
    let end = readme
        .find("<!-- ops:end -->")
        .expect("README has the ops markers");
    let listed: Vec<&str> = readme[start..end]
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .collect();
    let mut supported: Vec<String> = spillway::supported_ops()
        .into_iter()
        .map(String::from)
        .collect();
    supported.extend(
        spillway::supported_contrib_ops()
            .into_iter()
            .map(|(domain, op)| format!("{domain}:{op}")),
    );
    assert_eq!(
        listed, supported,
        "the README's operator list is stale: run scripts/gen-ops.sh"
    );
}

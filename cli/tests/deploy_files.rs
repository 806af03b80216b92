//! The deployment files in `deploy/` (the Dockerfiles and the KServe manifests) against the
//! binary they package: every `spillway serve` command line they spell out is parsed by this
//! build's `spillway` (it gets as far as loading the model, which is absent here), and their
//! ports, probes, kinds and names agree with each other. Text checks only: no Docker, no cluster.
#![cfg(feature = "serve")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn read(rel: &str) -> String {
    let path = deploy_dir().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `ENTRYPOINT [...]` of a Dockerfile (exec form), as its words.
fn entrypoint(dockerfile: &str) -> Vec<String> {
    let lines: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.trim_start().starts_with("ENTRYPOINT"))
        .collect();
    assert_eq!(lines.len(), 1, "one ENTRYPOINT: {lines:?}");
    let json = lines[0].trim_start()["ENTRYPOINT".len()..].trim();
    serde_json::from_str(json).unwrap_or_else(|e| panic!("exec-form ENTRYPOINT '{json}': {e}"))
}

/// The instructions of a Dockerfile's last stage (the image that ships).
fn final_stage(dockerfile: &str) -> Vec<&str> {
    let lines: Vec<&str> = dockerfile
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let last_from = lines
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .expect("a FROM");
    lines[last_from..].to_vec()
}

/// The arguments after `IMAGE` in the `docker run ... IMAGE args` example of the header comment.
fn docker_run_example(dockerfile: &str, image: &str) -> Vec<String> {
    let mut joined = String::new();
    for line in dockerfile.lines().take_while(|l| l.starts_with('#')) {
        let text = line.trim_start_matches('#').trim();
        joined.push(' ');
        joined.push_str(text.trim_end_matches('\\'));
    }
    let run = joined
        .find("docker run")
        .unwrap_or_else(|| panic!("no `docker run` example in the header"));
    let words: Vec<&str> = joined[run..].split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == image)
        .unwrap_or_else(|| panic!("the `docker run` example does not run {image}"));
    let mut args = Vec::new();
    for w in &words[at + 1..] {
        // The example's command line ends where the next comment sentence starts.
        if !(w.starts_with('-') || w.starts_with('/') || w.chars().all(|c| c.is_ascii_digit())) {
            break;
        }
        args.push(w.to_string());
    }
    args
}

/// The container `args:` list of a manifest (one container), unquoted, comments dropped.
fn yaml_args(yaml: &str) -> Vec<String> {
    let mut lines = yaml.lines().skip_while(|l| l.trim() != "args:");
    let head = lines.next().expect("an `args:` list");
    let indent = head.len() - head.trim_start().len();
    lines
        .take_while(|l| {
            let t = l.trim_start();
            t.starts_with("- ") && l.len() - t.len() > indent
        })
        .map(|l| {
            let item = l.trim_start()[2..].trim();
            let item = match item.find(" #") {
                Some(i) => item[..i].trim(),
                None => item,
            };
            item.trim_matches('"').trim_matches('\'').to_string()
        })
        .collect()
}

/// The value of `key: value` on the lines of `yaml` (every occurrence), unquoted.
fn values<'a>(yaml: &'a str, key: &str) -> Vec<&'a str> {
    yaml.lines()
        .filter_map(|l| {
            let t = l.trim_start().trim_start_matches("- ");
            t.strip_prefix(key)?.strip_prefix(':').map(|v| {
                let v = v.trim();
                let v = v.split(" #").next().unwrap_or(v).trim();
                v.trim_matches('"').trim_matches('\'')
            })
        })
        .collect()
}

fn the_value<'a>(yaml: &'a str, key: &str) -> &'a str {
    let all = values(yaml, key);
    assert_eq!(all.len(), 1, "one `{key}:` expected, found {all:?}");
    all[0]
}

/// The value of `--flag VALUE` or `--flag=VALUE` in a command line.
fn flag(argv: &[String], name: &str) -> Option<String> {
    argv.iter().enumerate().find_map(|(i, a)| {
        if a == name {
            argv.get(i + 1).cloned()
        } else {
            a.strip_prefix(name)?.strip_prefix('=').map(str::to_string)
        }
    })
}

/// The long options `spillway serve --help` lists.
fn serve_flags() -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_spillway"))
        .args(["serve", "--help"])
        .output()
        .expect("spillway serve --help runs");
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).expect("UTF-8 help");
    let flags: BTreeSet<String> = help
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_string()
        })
        .collect();
    assert!(flags.contains("--http-port"), "help parsed: {flags:?}");
    flags
}

/// Runs `spillway <argv>` with every model file moved to a directory that does not exist, and
/// checks that the command line was accepted: the run gets as far as loading the model (exit
/// status 1, "loading ..."), not a usage error (status 2).
fn check_parses(what: &str, argv: &[String]) {
    let absent = Path::new(env!("CARGO_TARGET_TMPDIR")).join("deploy-files-absent/model.onnx");
    let absent = absent.to_str().expect("UTF-8 path").to_string();
    let mut moved = 0;
    let argv: Vec<String> = argv
        .iter()
        .map(|a| {
            if a.starts_with('-') || !a.ends_with(".onnx") {
                return a.clone();
            }
            moved += 1;
            match a.split_once('=') {
                Some((name, _)) => format!("{name}={absent}"),
                None => absent.clone(),
            }
        })
        .collect();
    assert!(moved > 0, "{what}: no model file in {argv:?}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_spillway"))
        .args(&argv)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spillway starts");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("waits") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{what}: `spillway {argv:?}` did not stop (did it find a model and serve?)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr read");
    assert_eq!(
        status.code(),
        Some(1),
        "{what}: `spillway {argv:?}` was not accepted:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!("loading {absent}")),
        "{what}: `spillway {argv:?}` failed before loading the model:\n{stderr}"
    );
}

fn port(argv: &[String], name: &str) -> u16 {
    flag(argv, name)
        .unwrap_or_else(|| panic!("{name} missing from {argv:?}"))
        .parse()
        .unwrap_or_else(|e| panic!("{name} in {argv:?}: {e}"))
}

#[test]
fn dockerfiles_run_spillway_serve_with_flags_it_accepts() {
    let known = serve_flags();
    for (file, image) in [
        ("Dockerfile", "spillway:cpu"),
        ("Dockerfile.cuda", "spillway:cuda"),
    ] {
        let text = read(file);
        let entry = entrypoint(&text);
        assert_eq!(
            entry[..2],
            ["spillway", "serve"],
            "{file}: ENTRYPOINT {entry:?}"
        );
        assert_eq!(
            flag(&entry, "--host").as_deref(),
            Some("0.0.0.0"),
            "{file}: a container must listen beyond loopback: {entry:?}"
        );
        let build = text
            .lines()
            .find(|l| l.contains("cargo build"))
            .unwrap_or_else(|| panic!("{file}: no cargo build"));
        assert!(
            build.contains("--release") && build.contains("-p spillway-cli"),
            "{file}: {build}"
        );
        assert_eq!(
            build.contains("--features cuda"),
            file.ends_with(".cuda"),
            "{file}: {build}"
        );
        let stage = final_stage(&text);
        let user = stage
            .iter()
            .find_map(|l| l.strip_prefix("USER "))
            .unwrap_or_else(|| panic!("{file}: no USER in the runtime stage"));
        let uid = user.split(':').next().unwrap_or(user);
        assert!(
            uid.parse::<u32>().is_ok_and(|u| u != 0),
            "{file}: the runtime user must be a numeric non-root id, not '{user}'"
        );
        assert!(
            stage
                .iter()
                .any(|l| l.starts_with("COPY --from=") && l.ends_with(" /usr/local/bin/spillway")),
            "{file}: the runtime stage must put the binary on PATH as `spillway`"
        );

        let args = docker_run_example(&text, image);
        let argv: Vec<String> = entry[1..].iter().cloned().chain(args).collect();
        for a in argv.iter().filter(|a| a.starts_with("--")) {
            let name = a.split('=').next().unwrap_or(a);
            assert!(
                known.contains(name),
                "{file}: `spillway serve` has no {name}"
            );
        }
        let exposed: BTreeSet<u16> = stage
            .iter()
            .filter_map(|l| l.strip_prefix("EXPOSE "))
            .flat_map(|l| l.split_whitespace())
            .map(|p| p.parse().expect("a port number"))
            .collect();
        let served = BTreeSet::from([port(&argv, "--http-port"), port(&argv, "--grpc-port")]);
        assert_eq!(
            exposed, served,
            "{file}: EXPOSE and the example's ports differ"
        );
        check_parses(file, &argv);
    }
}

#[test]
fn kserve_manifests_agree_with_the_image_and_the_cli() {
    let known = serve_flags();
    let runtime = read("kserve/servingruntime.yaml");
    let isvc = read("kserve/inferenceservice.yaml");

    assert_eq!(
        the_value(&runtime, "apiVersion"),
        "serving.kserve.io/v1alpha1"
    );
    assert_eq!(the_value(&runtime, "kind"), "ServingRuntime");
    assert_eq!(the_value(&isvc, "apiVersion"), "serving.kserve.io/v1beta1");
    assert_eq!(the_value(&isvc, "kind"), "InferenceService");

    // The InferenceService names the runtime, a format it supports and a protocol it speaks.
    let runtime_name = values(&runtime, "name")[0];
    assert_eq!(the_value(&isvc, "runtime"), runtime_name);
    let formats = values(&runtime, "name");
    assert!(
        formats.contains(&"onnx"),
        "supportedModelFormats: {formats:?}"
    );
    let model_format = isvc
        .lines()
        .skip_while(|l| l.trim() != "modelFormat:")
        .nth(1)
        .and_then(|l| l.trim().strip_prefix("name:"))
        .map(str::trim)
        .expect("modelFormat: name:");
    assert!(formats.contains(&model_format), "{model_format}");
    let protocols: Vec<&str> = runtime
        .lines()
        .skip_while(|l| l.trim() != "protocolVersions:")
        .skip(1)
        .map_while(|l| l.trim().strip_prefix("- "))
        .collect();
    assert_eq!(protocols, ["v2", "grpc-v2"]);
    assert!(protocols.contains(&the_value(&isvc, "protocolVersion")));
    let grace: u32 = the_value(&isvc, "terminationGracePeriodSeconds")
        .parse()
        .expect("a number of seconds");
    assert!(grace > 0);

    // The container's args follow the image's entrypoint: that whole command line must parse.
    let args = yaml_args(&runtime);
    assert!(
        args.iter().any(|a| a.contains("/mnt/models/")),
        "the model comes from KServe's /mnt/models: {args:?}"
    );
    let entry = entrypoint(&read("Dockerfile"));
    let argv: Vec<String> = entry[1..]
        .iter()
        .cloned()
        .chain(
            args.iter()
                .map(|a| a.replace("{{.Name}}", "spillway-model")),
        )
        .collect();
    for a in argv.iter().filter(|a| a.starts_with("--")) {
        let name = a.split('=').next().unwrap_or(a);
        assert!(
            known.contains(name),
            "servingruntime.yaml: `spillway serve` has no {name}"
        );
    }
    check_parses("servingruntime.yaml", &argv);

    // KServe sends HTTP to 8080; the probes, the metrics annotation and any declared container
    // port are ports spillway listens on.
    let http = port(&argv, "--http-port");
    let grpc = port(&argv, "--grpc-port");
    assert_eq!(http, 8080, "KServe's predictor port");
    assert_ne!(http, grpc);
    let probe_ports = values(&runtime, "port");
    assert_eq!(
        probe_ports.len(),
        2,
        "readiness and liveness: {probe_ports:?}"
    );
    for p in probe_ports {
        assert_eq!(p.parse::<u16>().ok(), Some(http), "probe port {p}");
    }
    assert_eq!(
        values(&runtime, "path"),
        ["/v2/health/ready", "/v2/health/live"]
    );
    assert_eq!(
        the_value(&runtime, "prometheus.kserve.io/port")
            .parse::<u16>()
            .ok(),
        Some(http)
    );
    for yaml in [&runtime, &isvc] {
        for p in values(yaml, "containerPort") {
            let p: u16 = p.parse().expect("a port number");
            assert!(p == http || p == grpc, "containerPort {p} is not served");
        }
    }
}

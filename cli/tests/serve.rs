//! `spillway serve` as a process: it serves the bundled model on the ports it prints, answers
//! HTTP, and stops cleanly (status 0) on SIGTERM.
#![cfg(all(feature = "serve", unix))]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

/// One HTTP/1.1 exchange (`Connection: close`): the status code and the body.
fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connects");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("request written");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("answer read");
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

#[test]
fn serve_answers_and_stops_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_spillway"))
        .args([
            "serve",
            "--http-port",
            "0",
            "--grpc-port",
            "0",
            "--instances",
            "2",
            "--no-spin",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spillway serve starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next().expect("a line").expect("text");
    // "serving HTTP on http://ADDR and gRPC on ADDR; ..."
    let http_addr = first
        .split("http://")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in '{first}'"))
        .to_string();
    assert_eq!(http(&http_addr, "GET", "/v2/health/ready", "").0, 200);
    let (status, meta) = http(&http_addr, "GET", "/v2/models/inception_block", "");
    assert_eq!(status, 200, "{meta}");
    assert!(meta.contains("\"probabilities\""), "{meta}");
    let data = vec!["0.5"; 3 * 64 * 64].join(",");
    let request = format!(
        r#"{{"inputs":[{{"name":"input","shape":[1,3,64,64],"datatype":"FP32","data":[{data}]}}]}}"#
    );
    let (status, answer) = http(
        &http_addr,
        "POST",
        "/v2/models/inception_block/infer",
        &request,
    );
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains("\"shape\":[1,10]"), "{answer}");
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let status = child.wait().expect("exits");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let mut stderr = String::new();
    let _ = child
        .stderr
        .take()
        .map(|mut e| e.read_to_string(&mut stderr));
    assert!(status.success(), "exit {status:?}: {stderr}");
    assert!(
        rest.iter().any(|l| l.starts_with("stopped")),
        "{rest:?} {stderr}"
    );
}

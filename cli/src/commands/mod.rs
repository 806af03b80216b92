//! The commands of the `spillway` binary.

pub mod devices;
pub mod engine_options;
pub mod inputs;
pub mod outputs;
pub mod profile;
pub mod progress;
pub mod run;
pub mod schedule;
#[cfg(feature = "serve")]
pub mod serve;

/// Writes one line to standard output (the `say!` macro). A reader that has gone away ends
/// the program with status 0; any other write error with status 1 and a message.
pub fn write_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("error: writing to standard output: {e}");
            std::process::exit(1);
        }
    }
}

//! Generates the ONNX protobuf types from the vendored `.proto` files with prost,
//! parsing them with protox so that no `protoc` binary is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/onnx.proto", "proto/onnx-data.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    prost_build::Config::new()
        // `bytes` fields become `bytes::Bytes`, so tensors decoded from an mmap borrow it.
        .bytes(["."])
        .compile_fds(descriptors)?;
    Ok(())
}

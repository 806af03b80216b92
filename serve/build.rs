//! Generates the Open Inference Protocol's gRPC types, client and server from the vendored
//! `.proto` with tonic, parsing it with protox so that no `protoc` binary is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let file = "proto/grpc_predict_v2.proto";
    println!("cargo:rerun-if-changed={file}");
    let descriptors = protox::compile([file], ["proto"])?;
    tonic_prost_build::configure()
        // Tensor contents become `bytes::Bytes`: no copy out of the received buffer.
        .bytes(".")
        .compile_fds(descriptors)?;
    Ok(())
}

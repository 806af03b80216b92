//! The gRPC front-end: the Open Inference Protocol's `GRPCInferenceService`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use spillway::Tensor;
use tonic::{Request, Response, Status};

use crate::datatype::{self, Datatype};
use crate::error::ServeError;
use crate::proto::grpc_inference_service_server::{
    GrpcInferenceService, GrpcInferenceServiceServer,
};
use crate::proto::infer_parameter::ParameterChoice;
use crate::proto::model_infer_response::InferOutputTensor;
use crate::proto::model_metadata_response::TensorMetadata;
use crate::proto::*;
use crate::server::{MODEL_VERSION, ModelEntry, Shared, deadline_after_micros};

/// The service, with message limits of `max_message` bytes both ways.
pub(crate) fn service(
    shared: Arc<Shared>,
    max_message: usize,
) -> GrpcInferenceServiceServer<Service> {
    GrpcInferenceServiceServer::new(Service { shared })
        .max_decoding_message_size(max_message)
        .max_encoding_message_size(max_message)
}

/// The gRPC service over the server's models.
pub(crate) struct Service {
    shared: Arc<Shared>,
}

/// The `grpc-timeout` header's duration (`<digits><H|M|S|m|u|n>`).
fn grpc_timeout(metadata: &tonic::metadata::MetadataMap) -> Option<Duration> {
    let v = metadata.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

fn tensor_metadata(specs: &[crate::model::TensorSpec]) -> Vec<TensorMetadata> {
    specs
        .iter()
        .map(|s| TensorMetadata {
            name: s.name.clone(),
            datatype: s
                .dtype
                .and_then(Datatype::from_dtype)
                .map_or("", Datatype::name)
                .to_string(),
            shape: s.protocol_shape(),
        })
        .collect()
}

#[tonic::async_trait]
impl GrpcInferenceService for Service {
    async fn server_live(
        &self,
        _: Request<ServerLiveRequest>,
    ) -> Result<Response<ServerLiveResponse>, Status> {
        Ok(Response::new(ServerLiveResponse { live: true }))
    }

    async fn server_ready(
        &self,
        _: Request<ServerReadyRequest>,
    ) -> Result<Response<ServerReadyResponse>, Status> {
        Ok(Response::new(ServerReadyResponse {
            ready: self.shared.ready(),
        }))
    }

    async fn model_ready(
        &self,
        request: Request<ModelReadyRequest>,
    ) -> Result<Response<ModelReadyResponse>, Status> {
        let r = request.into_inner();
        self.shared.model(&r.name, Some(&r.version))?;
        Ok(Response::new(ModelReadyResponse {
            ready: self.shared.ready(),
        }))
    }

    async fn server_metadata(
        &self,
        _: Request<ServerMetadataRequest>,
    ) -> Result<Response<ServerMetadataResponse>, Status> {
        Ok(Response::new(ServerMetadataResponse {
            name: "spillway".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            extensions: crate::http::EXTENSIONS.map(String::from).to_vec(),
        }))
    }

    async fn model_metadata(
        &self,
        request: Request<ModelMetadataRequest>,
    ) -> Result<Response<ModelMetadataResponse>, Status> {
        let r = request.into_inner();
        let m = self.shared.model(&r.name, Some(&r.version))?;
        Ok(Response::new(ModelMetadataResponse {
            name: m.name.clone(),
            versions: vec![MODEL_VERSION.into()],
            platform: crate::PLATFORM.into(),
            inputs: tensor_metadata(&m.inputs),
            outputs: tensor_metadata(&m.outputs),
        }))
    }

    async fn model_infer(
        &self,
        request: Request<ModelInferRequest>,
    ) -> Result<Response<ModelInferResponse>, Status> {
        let arrived = Instant::now();
        let header_deadline = grpc_timeout(request.metadata()).map(|d| arrived + d);
        let r = request.into_inner();
        let m = self.shared.model(&r.model_name, Some(&r.model_version))?;
        let mut tracker = m.track();
        let span = tracing::info_span!("infer", protocol = "grpc", model = %m.name, id = %r.id);
        let result = tracing::Instrument::instrument(
            async {
                self.shared.admit()?;
                let (inputs, outputs, deadline) = decode(m, &r, arrived, header_deadline)?;
                tracker.set_deadline(deadline);
                let results = m.infer(inputs, deadline).await?;
                encode(m, r.id.clone(), &outputs, results)
            },
            span.clone(),
        )
        .await;
        tracker.finish(&result);
        if let Err(e) = &result {
            tracing::debug!(parent: &span, error = %e, "request failed");
        }
        Ok(Response::new(result?))
    }
}

type Decoded = (Vec<(String, Tensor)>, Vec<String>, Option<Instant>);

fn decode(
    m: &ModelEntry,
    r: &ModelInferRequest,
    arrived: Instant,
    header_deadline: Option<Instant>,
) -> Result<Decoded, ServeError> {
    let mut deadline = header_deadline;
    if let Some(p) = r.parameters.get("timeout") {
        let micros = match &p.parameter_choice {
            Some(ParameterChoice::Int64Param(us)) => *us,
            _ => {
                return Err(ServeError::BadRequest(
                    "parameter 'timeout' must be an int64 (microseconds)".into(),
                ));
            }
        };
        if let Some(d) = deadline_after_micros(arrived, micros)? {
            deadline = Some(deadline.map_or(d, |h| h.min(d)));
        }
    }
    let raw = &r.raw_input_contents;
    if !raw.is_empty() && raw.len() != r.inputs.len() {
        return Err(ServeError::BadRequest(format!(
            "{} raw_input_contents for {} inputs",
            raw.len(),
            r.inputs.len()
        )));
    }
    let mut inputs = Vec::with_capacity(r.inputs.len());
    for (i, input) in r.inputs.iter().enumerate() {
        let dt = datatype::parse_datatype(&input.datatype, &input.name)?;
        let tensor = match (raw.get(i), &input.contents) {
            (Some(_), Some(_)) => {
                return Err(ServeError::BadRequest(format!(
                    "input '{}' has both contents and raw_input_contents",
                    input.name
                )));
            }
            (Some(bytes), None) => datatype::tensor_from_raw(dt, &input.shape, bytes, &input.name)?,
            (None, Some(c)) => datatype::tensor_from_contents(dt, &input.shape, c, &input.name)?,
            (None, None) => {
                return Err(ServeError::BadRequest(format!(
                    "input '{}' has no data (contents or raw_input_contents)",
                    input.name
                )));
            }
        };
        inputs.push((input.name.clone(), tensor));
    }
    m.check_inputs(&inputs)?;
    let outputs: Vec<String> = match r.outputs.is_empty() {
        true => m.outputs.iter().map(|o| o.name.clone()).collect(),
        false => {
            m.check_outputs(r.outputs.iter().map(|o| o.name.as_str()))?;
            if r.outputs
                .iter()
                .any(|o| o.parameters.contains_key("classification"))
            {
                return Err(ServeError::BadRequest(
                    "the classification extension is not supported".into(),
                ));
            }
            r.outputs.iter().map(|o| o.name.clone()).collect()
        }
    };
    Ok((inputs, outputs, deadline))
}

/// The response: every output's data in raw_output_contents, as Triton answers.
fn encode(
    m: &ModelEntry,
    id: String,
    wanted: &[String],
    results: Vec<(String, Tensor)>,
) -> Result<ModelInferResponse, ServeError> {
    let mut response = ModelInferResponse {
        model_name: m.name.clone(),
        model_version: MODEL_VERSION.into(),
        id,
        ..Default::default()
    };
    for name in wanted {
        let (_, tensor) = results.iter().find(|(n, _)| n == name).ok_or_else(|| {
            ServeError::Internal(format!("model '{}' returned no output '{name}'", m.name))
        })?;
        let dt = datatype::output_datatype(tensor, name)?;
        response.outputs.push(InferOutputTensor {
            name: name.clone(),
            datatype: dt.name().into(),
            shape: tensor.shape().iter().map(|&d| d as i64).collect(),
            ..Default::default()
        });
        response
            .raw_output_contents
            .push(datatype::tensor_to_raw(tensor, dt).into());
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse() {
        let mut md = tonic::metadata::MetadataMap::new();
        assert_eq!(grpc_timeout(&md), None);
        md.insert("grpc-timeout", "250m".parse().expect("ascii"));
        assert_eq!(grpc_timeout(&md), Some(Duration::from_millis(250)));
        md.insert("grpc-timeout", "3S".parse().expect("ascii"));
        assert_eq!(grpc_timeout(&md), Some(Duration::from_secs(3)));
        md.insert("grpc-timeout", "x".parse().expect("ascii"));
        assert_eq!(grpc_timeout(&md), None);
    }
}

//! Every request has a `tracing` span (`infer`, with its protocol, model and id), and its run
//! a `compute` span inside it on the worker thread, with the engine's `run` inside that: an
//! application's own subscriber sees them all.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use spillway_serve::{ModelOptions, SessionModel};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// Records every new span as `name(parent: fields)`.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<String>>>);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={:?} ", field.name(), value));
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields(String::new());
        attrs.record(&mut fields);
        let parent = ctx
            .span(id)
            .and_then(|s| s.parent().map(|p| p.name()))
            .unwrap_or("-");
        let line = format!("{}({parent}: {})", attrs.metadata().name(), fields.0.trim());
        self.0.lock().expect("spans").push(line);
    }

    fn on_record(&self, id: &Id, values: &tracing::span::Record<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields(String::new());
        values.record(&mut fields);
        let name = ctx.span(id).map_or("?", |s| s.name());
        let line = format!("{name}+({})", fields.0.trim());
        self.0.lock().expect("spans").push(line);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_has_an_infer_span_with_its_run_inside() {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    let model = Arc::new(SessionModel::new(gather_session()));
    let server = start(vec![("gather", model, ModelOptions::default())]).await;
    let client = reqwest::Client::new();
    let body = serde_json::json!({
        "id": "traced-1",
        "inputs": [{ "name": "index", "shape": [1], "datatype": "INT64", "data": [1] }]
    });
    let (status, _) = post_json(
        &client,
        &format!("{}/v2/models/gather/infer", base(&server)),
        &body,
    )
    .await;
    assert_eq!(status, 200);
    server.shutdown();
    server.wait().await.expect("clean stop");
    let seen = spans.0.lock().expect("spans").clone();
    assert!(
        seen.iter().any(|s| s.starts_with("infer(")
            && s.contains("protocol=\"http\"")
            && s.contains("model=gather")),
        "{seen:#?}"
    );
    // The request's id is recorded on the span once the body is read.
    assert!(
        seen.iter()
            .any(|s| s.starts_with("infer+(") && s.contains("traced-1")),
        "{seen:#?}"
    );
    assert!(
        seen.iter().any(|s| s.starts_with("compute(infer:")),
        "{seen:#?}"
    );
    assert!(
        seen.iter().any(|s| s.starts_with("run(compute:")),
        "the engine's run span nests inside: {seen:#?}"
    );
}

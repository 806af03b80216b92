//! Loading details: raw (unaligned) and typed initializer fields, external data files,
//! ids resolved once, and concurrent runs of one session.

use prost::Message;
use spillway::Session;
use spillway::onnx::proto::{self, StringStringEntryProto, TensorProto};
use spillway_kernels::Tensor;
use spillway_tests::build::ModelBuilder;

/// Adds `w` (f32 [4], values 1..4) in the given storage, then y = x + w.
fn model_with(w: TensorProto) -> Vec<u8> {
    let mut m = ModelBuilder::new(1);
    m.input("x", &[4])
        .node("Add", &["x", "w"], &["y"], &[])
        .output("y");
    let mut model = proto::ModelProto::decode(m.to_bytes(13).as_slice()).unwrap();
    model.graph.as_mut().unwrap().initializer.push(w);
    model.encode_to_vec()
}

fn weight_proto() -> TensorProto {
    TensorProto {
        name: Some("w".into()),
        dims: vec![4],
        data_type: Some(1),
        ..Default::default()
    }
}

fn le_bytes() -> Vec<u8> {
    [1.0f32, 2.0, 3.0, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

fn run_x_plus_w(session: &Session) -> Vec<f32> {
    let x = Tensor::from_shape_vec(&[4], vec![10.0f32; 4]).unwrap();
    session.run([("x", x)]).unwrap()[0]
        .view::<f32>()
        .unwrap()
        .iter()
        .copied()
        .collect()
}

#[test]
fn raw_data_and_typed_fields_decode_alike() {
    let raw = TensorProto {
        raw_data: Some(le_bytes().into()),
        ..weight_proto()
    };
    let typed = TensorProto {
        float_data: vec![1.0, 2.0, 3.0, 4.0],
        ..weight_proto()
    };
    for w in [raw, typed] {
        let session = Session::builder()
            .commit_from_memory(&model_with(w))
            .unwrap();
        assert_eq!(run_x_plus_w(&session), [11.0, 12.0, 13.0, 14.0]);
    }
}

#[test]
fn external_data_is_read_relative_to_the_model() {
    let dir = std::env::temp_dir().join(format!("spillway-external-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut blob = vec![0xAAu8; 3]; // an odd offset: the data is not aligned in the file
    blob.extend(le_bytes());
    std::fs::write(dir.join("weights.bin"), &blob).unwrap();
    let entry = |k: &str, v: &str| StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v.into()),
    };
    let mut w = weight_proto();
    w.set_data_location(proto::tensor_proto::DataLocation::External);
    w.external_data = vec![
        entry("location", "weights.bin"),
        entry("offset", "3"),
        entry("length", "16"),
    ];
    let bytes = model_with(w.clone());
    std::fs::write(dir.join("model.onnx"), &bytes).unwrap();
    let session = Session::builder()
        .commit_from_file(dir.join("model.onnx"))
        .unwrap();
    assert_eq!(run_x_plus_w(&session), [11.0, 12.0, 13.0, 14.0]);

    // From memory there is no folder to resolve against; escaping the folder is refused.
    assert!(Session::builder().commit_from_memory(&bytes).is_err());
    w.external_data = vec![entry("location", "../weights.bin")];
    std::fs::write(dir.join("escape.onnx"), model_with(w)).unwrap();
    assert!(
        Session::builder()
            .commit_from_file(dir.join("escape.onnx"))
            .is_err()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn wrong_element_count_is_an_invalid_model() {
    let short = TensorProto {
        float_data: vec![1.0, 2.0],
        ..weight_proto()
    };
    assert!(matches!(
        Session::builder().commit_from_memory(&model_with(short)),
        Err(spillway::Error::InvalidModel(_))
    ));
}

/// y = x + Cast<float>(w) for an initializer `w` of three elements in some storage.
fn x_plus_cast(w: TensorProto) -> Result<Vec<f32>, spillway::Error> {
    use spillway_tests::build::Attr;
    let mut m = ModelBuilder::new(1);
    m.input("x", &[3])
        .node("Cast", &["w"], &["wf"], &[("to", Attr::Int(1))])
        .node("Add", &["x", "wf"], &["y"], &[])
        .output("y");
    let mut model = proto::ModelProto::decode(m.to_bytes(21).as_slice()).unwrap();
    model.graph.as_mut().unwrap().initializer.push(w);
    let session = Session::builder().commit_from_memory(&model.encode_to_vec())?;
    let x = Tensor::from_shape_vec(&[3], vec![0.0f32; 3]).unwrap();
    let y = session.run([("x", x)])?;
    Ok(y[0].view::<f32>().unwrap().iter().copied().collect())
}

fn low_precision_proto(data_type: i32) -> TensorProto {
    TensorProto {
        name: Some("w".into()),
        dims: vec![3],
        data_type: Some(data_type),
        ..Default::default()
    }
}

#[test]
fn packed_low_precision_initializers_decode() {
    // int4 [7, -8, -1]: two per byte, low nibble first, the odd last byte zero-padded.
    let raw = TensorProto {
        raw_data: Some(vec![0x87, 0x0F].into()),
        ..low_precision_proto(22)
    };
    let typed = TensorProto {
        int32_data: vec![0x87, 0x0F],
        ..low_precision_proto(22)
    };
    for w in [raw, typed] {
        assert_eq!(x_plus_cast(w).unwrap(), [7.0, -8.0, -1.0]);
    }
    // uint2 [3, 0, 2]: four per byte, 0b00_10_00_11.
    let u2 = TensorProto {
        raw_data: Some(vec![0b0010_0011].into()),
        ..low_precision_proto(25)
    };
    assert_eq!(x_plus_cast(u2).unwrap(), [3.0, 0.0, 2.0]);
    // float8 E4M3FN [448, 1, -0.46875]: one element per byte or per int32.
    let f8 = TensorProto {
        int32_data: vec![0x7E, 0x38, 0xAF],
        ..low_precision_proto(17)
    };
    assert_eq!(x_plus_cast(f8).unwrap(), [448.0, 1.0, -0.46875]);
    // A packed payload of the wrong size is an invalid model, not a panic.
    let short = TensorProto {
        raw_data: Some(vec![0x87].into()),
        ..low_precision_proto(22)
    };
    assert!(matches!(
        x_plus_cast(short),
        Err(spillway::Error::InvalidModel(_))
    ));
}

/// A default session on the bundled model (its batch is symbolic).
fn inception_block() -> Session {
    Session::builder()
        .commit_from_file(
            spillway_tests::workspace_root().join("models/small/inception_block.onnx"),
        )
        .unwrap()
}

#[test]
fn one_session_runs_from_many_threads() {
    let session = inception_block();
    let input = |seed: usize| {
        let data: Vec<f32> = (0..3 * 64 * 64)
            .map(|i| ((i * 7 + seed * 13) % 97) as f32 / 97.0)
            .collect();
        Tensor::from_shape_vec(&[1, 3, 64, 64], data).unwrap()
    };
    let expected: Vec<Tensor> = (0..4)
        .map(|s| session.run([("input", input(s))]).unwrap()[0].clone())
        .collect();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (session, expected) = (&session, &expected);
            scope.spawn(move || {
                for r in 0..10 {
                    let seed = (t + r) % 4;
                    let got = session.run([("input", input(seed))]).unwrap();
                    assert_eq!(got[0], expected[seed], "thread {t} run {r}");
                }
            });
        }
    });
}

#[test]
fn memory_plan_reuses_bytes_without_overlap() {
    let session = inception_block();
    let plan = session.memory_plan(&[("input", &[2, 3, 64, 64])]).unwrap();
    spillway::memory::verify(session.graph(), &plan).unwrap();
    assert!(
        plan.dynamic.is_empty(),
        "every size is known once the batch is bound"
    );
    // The stem output (2×16×32×32 f32 = 128 KiB) is the largest intermediate.
    assert!(plan.peak_bytes >= 2 * 16 * 32 * 32 * 4);
    assert!(plan.peak_bytes < plan.naive_bytes, "the plan reuses memory");
}

/// A model with a symbolic batch has its memory planned for input shapes that come twice in a
/// row: the third run of a shape writes its intermediates into the memory the second one left
/// (before, with no size known, they came from the allocator on every run), and runs
/// alternating between batch sizes stay right: each image of a batch of 3 matches its run alone.
#[test]
fn runs_plan_memory_for_their_input_shapes() {
    let session = inception_block();
    let image = |seed| spillway_tests::seeded_f32(&[1, 3, 64, 64], seed);
    let batch = |seeds: &[u64]| {
        let data: Vec<f32> = seeds
            .iter()
            .flat_map(|&s| image(s).to_f64_vec().unwrap())
            .map(|v| v as f32)
            .collect();
        Tensor::from_shape_vec(&[seeds.len(), 3, 64, 64], data).unwrap()
    };
    let (_, first) = session.run_with_stats([("input", batch(&[1, 2]))]).unwrap();
    session.run([("input", batch(&[3, 4]))]).unwrap();
    let (_, third) = session.run_with_stats([("input", batch(&[8, 9]))]).unwrap();
    assert!(
        third.reused_outputs > 0 && third.reused_outputs >= first.reused_outputs,
        "first run {first:?}, third {third:?}"
    );
    let alone: Vec<Vec<f64>> = [5, 6, 7]
        .iter()
        .map(|&s| {
            session.run([("input", image(s))]).unwrap()[0]
                .to_f64_vec()
                .unwrap()
        })
        .collect();
    let together = session.run([("input", batch(&[5, 6, 7]))]).unwrap()[0]
        .to_f64_vec()
        .unwrap();
    for (i, want) in alone.iter().enumerate() {
        let got = &together[i * want.len()..(i + 1) * want.len()];
        for (a, b) in got.iter().zip(want) {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                "image {i}: {a} vs {b} alone"
            );
        }
    }
}

fn weight_with_data() -> TensorProto {
    TensorProto {
        float_data: vec![1.0, 2.0, 3.0, 4.0],
        ..weight_proto()
    }
}

#[test]
fn the_models_metadata_is_reported() {
    let mut model = proto::ModelProto::decode(model_with(weight_with_data()).as_slice()).unwrap();
    model.producer_name = Some("pytorch".into());
    model.producer_version = Some("2.9.0".into());
    model.domain = Some("ai.example".into());
    model.model_version = Some(7);
    model.doc_string = Some("adds a weight".into());
    let graph = model.graph.as_mut().unwrap();
    graph.name = Some("main".into());
    graph.doc_string = Some("x + w".into());
    model.metadata_props = vec![StringStringEntryProto {
        key: Some("labels".into()),
        value: Some("a,b,c".into()),
    }];
    let session = Session::builder()
        .commit_from_memory(&model.encode_to_vec())
        .unwrap();
    let meta = session.metadata();
    assert_eq!(
        (meta.producer_name.as_str(), meta.producer_version.as_str()),
        ("pytorch", "2.9.0")
    );
    assert_eq!(
        (meta.domain.as_str(), meta.model_version),
        ("ai.example", 7)
    );
    assert_eq!(
        (meta.description.as_str(), meta.graph_name.as_str()),
        ("adds a weight", "main")
    );
    assert_eq!(meta.graph_description, "x + w");
    assert_eq!(meta.custom.get("labels").map(String::as_str), Some("a,b,c"));
    // The optimized graph keeps it; a model without any reports empty fields.
    let plain = Session::builder()
        .commit_from_memory(&model_with(weight_with_data()))
        .unwrap();
    assert!(plain.metadata().custom.is_empty() && plain.metadata().domain.is_empty());
}

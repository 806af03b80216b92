use spillway::{OptimizationLevel, Session, Tensor};
use spillway_tests::oracle::{Oracle, OrtConfig};
fn main() {
    let p = spillway_tests::onnx_test_data().join("light/light_densenet121.onnx");
    let n = 3 * 224 * 224;
    let mut s = 17u64.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let data: Vec<f32> = (0..n).map(|_| { s ^= s << 13; s ^= s >> 7; s ^= s << 17; ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0 }).collect();
    let x = Tensor::from_shape_vec(&[1, 3, 224, 224], data).unwrap();
    let mut o = Oracle::load(&p, OrtConfig::default()).unwrap();
    let theirs = o.run(&[("data_0".into(), x.clone())]).unwrap();
    for lvl in [OptimizationLevel::Disabled, OptimizationLevel::All] {
        let sess = Session::builder().with_optimization(lvl).commit_from_file(&p).unwrap();
        let ours = sess.run([("data_0", x.clone())]).unwrap();
        let e = spillway_tests::relative_l2(&theirs[0], &ours[0]).unwrap();
        let v = theirs[0].to_f64_vec().unwrap();
        println!("{lvl:?}: rel l2 {e:e}; ort max {:?} min {:?}", v.iter().cloned().fold(f64::MIN, f64::max), v.iter().cloned().fold(f64::MAX, f64::min));
    }
}

//! Scheduling time of the placement policies on graphs of the papers' model sizes.
//! `cargo bench -p spillway-benches --bench placement`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use spillway_placement::generate::{
    LayeredParams, PAPER_MODELS, hios_layered, hios_topology, sized,
};
use spillway_placement::policy::common::Ctx;
use spillway_placement::policy::{greedy, heft, hios_lp, hios_mr, lios, nimble, opara, sequential};
use spillway_placement::{Options, Policy, place, simulate};

fn paper_models(c: &mut Criterion) {
    let t = hios_topology(1, 8);
    let mut grp = c.benchmark_group("paper_models_8_streams");
    for (name, ops, edges) in PAPER_MODELS {
        let g = sized(ops, edges, 1);
        let ctx = Ctx::new(&g, &t).expect("valid");
        grp.bench_with_input(BenchmarkId::new("lios", name), &ctx, |b, c| {
            b.iter(|| lios::lios(c))
        });
        grp.bench_with_input(BenchmarkId::new("opara_alloc", name), &ctx, |b, c| {
            b.iter(|| opara::allocate_streams(&c.dag))
        });
        grp.bench_with_input(BenchmarkId::new("opara", name), &ctx, |b, c| {
            b.iter(|| opara::opara(c))
        });
        grp.bench_with_input(BenchmarkId::new("nimble", name), &ctx, |b, c| {
            b.iter(|| nimble::nimble(c))
        });
        grp.bench_with_input(BenchmarkId::new("greedy", name), &ctx, |b, c| {
            b.iter(|| greedy::greedy(c))
        });
        grp.bench_with_input(BenchmarkId::new("sequential", name), &ctx, |b, c| {
            b.iter(|| sequential::sequential(c))
        });
        grp.bench_with_input(BenchmarkId::new("simulate_lios", name), &g, |b, g| {
            let s = place(Policy::Lios, g, &t, &Options::default()).expect("lios");
            b.iter(|| simulate(g, &t, &s))
        });
    }
    grp.finish();
}

fn multi_gpu(c: &mut Criterion) {
    let g = hios_layered(&LayeredParams::default(), 1);
    let t = hios_topology(4, 2);
    let ctx = Ctx::new(&g, &t).expect("valid");
    let mut grp = c.benchmark_group("hios_default_200ops_4gpus");
    grp.sample_size(10);
    grp.bench_function("heft", |b| b.iter(|| heft::heft(&ctx)));
    grp.bench_function("hios_lp_w3", |b| b.iter(|| hios_lp::hios_lp(&ctx, 3)));
    grp.bench_function("hios_mr_w3", |b| b.iter(|| hios_mr::hios_mr(&ctx, 3)));
    grp.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = paper_models, multi_gpu
}
criterion_main!(benches);

//! Runs the seed example (examples/seed.rs) as its user would, with fewer steps.

#[allow(dead_code)]
#[path = "../examples/seed.rs"]
mod example;

#[test]
fn the_seed_example_trains_and_its_cost_falls() {
    let (first, last) =
        example::train(wgcompute::MemoryLimit::Bytes(1 << 30), 12).expect("the example runs");
    assert!(first.is_finite() && last.is_finite());
    assert!(
        last < first,
        "cost {first} → {last} should fall over 12 Adam steps"
    );
}

//! Runs the seed example (examples/seed.rs) as its user would, with fewer steps.

use crate::common::memory_lock_shared;

#[allow(dead_code)]
#[path = "../../examples/seed.rs"]
mod example;

#[test]
fn the_seed_example_trains_and_its_cost_falls() {
    // The example opens its own session on the default adapter, so it holds the memory lock itself.
    let _shared = memory_lock_shared();
    let (first, last) =
        example::train(wgcompute::MemoryLimit::Bytes(1 << 30), 12).expect("the example runs");
    assert!(first.is_finite() && last.is_finite());
    assert!(
        last < first,
        "cost {first} → {last} should fall over 12 Adam steps"
    );
}

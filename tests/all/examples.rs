//! The Rust examples that train, run as tests: examples/digits_cnn.rs fits its CNN (a JSON config of Keras's
//! layers) with the library's fit loop on the vendored digits and must reach a held-out accuracy no guess
//! reaches.

use crate::common::{vulkan_only, Backend};

#[allow(dead_code)] // its main, which the test does not run
#[path = "../../examples/digits_cnn.rs"]
mod digits_cnn;

vulkan_only!(the_digits_cnn_example_learns_the_digits);
fn the_digits_cnn_example_learns_the_digits(backend: &Backend) {
    let (pixels, labels) = digits_cnn::digits();
    assert_eq!(
        (pixels.len(), labels.len()),
        (1797 * 64, 1797),
        "the vendored digits"
    );
    assert!(pixels.iter().all(|pixel| (0.0..=1.0).contains(pixel)));
    for digit in 0..10 {
        let count = labels.iter().filter(|&&label| label == digit).count();
        assert!((170..=190).contains(&count), "{count} images of {digit}");
    }
    let session = backend.open();
    let trainer = digits_cnn::train(&session, 3, 0).expect("the fit");
    let last = trainer.history().last().expect("three epochs");
    let held_out = last.val_accuracy.expect("a held-out quarter");
    // A tenth is a guess; the Python example reaches 0.97 in four epochs.
    assert!(
        held_out >= 0.9,
        "held-out accuracy {held_out} after 3 epochs: {:?}",
        trainer.history()
    );
    assert!(
        last.loss < trainer.history()[0].loss,
        "the loss fell: {:?}",
        trainer.history()
    );
}
